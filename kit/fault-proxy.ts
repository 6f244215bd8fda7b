import { createHash } from 'node:crypto';
import net from 'node:net';

/**
 * A TCP proxy on loopback that injects faults between a client and a server, for tests,
 * the chaos harness and the demo (plain Node, nothing jest-specific):
 *
 * - `pass`: bytes flow both ways untouched.
 * - `reset`: the client's connection is reset (RST) as its request starts; the request
 *   never reaches the server (a request lost on the way).
 * - `drop`: the request reaches the server; when the server's answer starts, the
 *   client's connection is reset instead (the server committed, the client sees
 *   ECONNRESET / "other side closed": a response lost on the way back).
 * - `delay`: the server's answer is held for `delayMs` (set it past the client's
 *   timeout: the client gives up on an attempt the server did apply).
 *
 * Faults are decided per *exchange*: one request and its response. For HTTP/1.x
 * without pipelining (fetch's and Node's default) an exchange starts whenever the
 * client sends after the server has; the request head is peeked (never altered) for
 * `keyHeader`. Other protocols (Postgres) see one exchange per turn and no key.
 *
 * Seeded: with `faults`, an exchange's fault is a hash of (seed, key, how many times
 * the key was seen), so a run with the same keys gets the same faults whatever the
 * interleaving of concurrent connections. Keyless exchanges are numbered in arrival
 * order (deterministic only when sequential).
 *
 * `down()` closes every connection and stops listening (new connections are refused,
 * ECONNREFUSED); `up()` listens again on the same port.
 */
export type Fault = 'pass' | 'reset' | 'drop' | 'delay';

/** One request/response turn as the proxy saw its start. */
export interface Exchange {
  /** Accept order of the connection, from 0. */
  connection: number;
  /** Order of this exchange on its connection, from 0. */
  index: number;
  /** The `keyHeader` value in the request head, if there was one. */
  key: string | undefined;
  /** Earlier exchanges with the same key (for keyless ones, earlier keyless ones). */
  occurrence: number;
  /** `POST /charges HTTP/1.1`, or undefined when the request is not HTTP/1.x. */
  requestLine: string | undefined;
}

/** An exchange and the fault it got. */
export interface ExchangeRecord extends Exchange {
  fault: Fault;
}

export interface FaultProxyOptions {
  /** Where connections go. */
  target: { host: string; port: number };
  /** Share of exchanges given each fault, e.g. `{ drop: 0.2, reset: 0.1 }`; the rest pass. */
  faults?: Partial<Record<Exclude<Fault, 'pass'>, number>>;
  /** Seed of the `faults` draw. Default 1. */
  seed?: number;
  /** After this many faults a key only passes, so every operation can finish. Default Infinity. */
  maxFaultsPerKey?: number;
  /** How long `delay` holds a response, in ms. Default 5000. */
  delayMs?: number;
  /** The request header naming the logical operation. Default `idempotency-key`. */
  keyHeader?: string;
  /** Decides each exchange instead of `faults` (a scripted scenario). */
  decide?: (exchange: Exchange) => Fault;
  /**
   * Told when an exchange's answer is about to reach the client (a `delay`ed one when it
   * is released), with its bytes up to the end of the head; they wait until it settles.
   * For checks that must run after the server answered and before the client saw it.
   */
  beforeAnswer?: (exchange: ExchangeRecord, head: Buffer) => Promise<void> | void;
}

const HEAD_LIMIT = 64 * 1024;
const FAULT_ORDER = ['reset', 'drop', 'delay'] as const;

export class FaultProxy {
  private server: net.Server | undefined;
  private readonly sockets = new Set<net.Socket>();
  private readonly seen = new Map<string, number>();
  private readonly faulted = new Map<string, number>();
  private keyless = 0;
  private connections = 0;
  private readonly records: ExchangeRecord[] = [];

  private constructor(
    /** The loopback port the proxy listens on (reserved even while down). */
    readonly port: number,
    private readonly options: FaultProxyOptions,
  ) {
    for (const [fault, share] of Object.entries(options.faults ?? {}))
      if (!(share >= 0 && share <= 1)) throw new Error(`faults.${fault} must be in [0, 1]`);
    const total = Object.values(options.faults ?? {}).reduce((a, b) => a + b, 0);
    if (total > 1) throw new Error('the fault shares add up to more than 1');
  }

  /** A proxy on a free loopback port, down (nothing listening) until `up()`. */
  static async create(options: FaultProxyOptions): Promise<FaultProxy> {
    const probe = net.createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    const { port } = probe.address() as net.AddressInfo;
    await new Promise<void>((resolve) => probe.close(() => resolve()));
    return new FaultProxy(port, options);
  }

  /** A proxy on a free loopback port, listening. */
  static async start(options: FaultProxyOptions): Promise<FaultProxy> {
    const proxy = await FaultProxy.create(options);
    await proxy.up();
    return proxy;
  }

  /** `http://127.0.0.1:<port>`. */
  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  get isUp(): boolean {
    return this.server !== undefined;
  }

  /** Every exchange so far, in the order they were decided. */
  get exchanges(): readonly ExchangeRecord[] {
    return this.records;
  }

  /** How many exchanges got each fault. */
  counts(): Record<Fault, number> {
    const counts = { pass: 0, reset: 0, drop: 0, delay: 0 };
    for (const r of this.records) counts[r.fault]++;
    return counts;
  }

  async up(): Promise<void> {
    if (this.server) return;
    const server = net.createServer((client) => this.proxy(client));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.port, '127.0.0.1', resolve);
    });
    this.server = server;
  }

  async down(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    for (const socket of this.sockets) socket.destroy();
    this.sockets.clear();
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  /** Same as `down()`: for `finally` blocks and cleanups. */
  close(): Promise<void> {
    return this.down();
  }

  private proxy(client: net.Socket): void {
    const connection = this.connections++;
    const upstream = net.connect(this.options.target.port, this.options.target.host);
    const both = [client, upstream];
    const kill = (): void => {
      for (const s of both) s.destroy();
    };
    for (const socket of both) {
      this.sockets.add(socket);
      socket.on('close', () => {
        this.sockets.delete(socket);
        kill();
      });
      socket.on('error', kill);
    }

    let index = -1;
    let fault: Fault = 'pass';
    let exchange: ExchangeRecord | undefined; // the current one, while beforeAnswer waits for it
    let gate: Buffer[] | undefined; // answer bytes held for beforeAnswer
    let head: Buffer[] | undefined; // request bytes held until the fault is decided
    let answered = true; // the server has spoken since the client last did
    let held: Buffer[] | undefined; // a delayed response
    let upstreamEnded = false;

    client.on('data', (chunk: Buffer) => {
      if (answered) {
        answered = false;
        index++;
        fault = 'pass';
        head = [];
      }
      if (head === undefined) return forward(client, upstream, chunk);
      head.push(chunk);
      const bytes = Buffer.concat(head);
      const parsed = peekHead(bytes, this.options.keyHeader ?? 'idempotency-key');
      if (parsed === 'incomplete' && bytes.length < HEAD_LIMIT) return;
      head = undefined;
      const record = this.decide({
        connection,
        index,
        ...(parsed === 'incomplete' ? { key: undefined, requestLine: undefined } : parsed),
      });
      fault = record.fault;
      if (this.options.beforeAnswer !== undefined) exchange = record;
      if (fault === 'reset') {
        client.resetAndDestroy();
        upstream.destroy();
        return;
      }
      forward(client, upstream, bytes);
    });

    upstream.on('data', (chunk: Buffer) => {
      const first = !answered;
      answered = true;
      if (fault === 'drop') {
        client.resetAndDestroy();
        upstream.destroy();
        return;
      }
      if (fault === 'delay' && (first || held !== undefined)) {
        if (held === undefined) {
          held = [];
          const timer = setTimeout(() => {
            const chunks = held ?? [];
            held = undefined;
            for (const c of chunks) toClient(c);
            if (upstreamEnded && gate === undefined) client.end();
          }, this.options.delayMs ?? 5000);
          client.once('close', () => clearTimeout(timer));
        }
        held.push(chunk);
        return;
      }
      toClient(chunk);
    });

    // Answer bytes on their way to the client: the head of each goes to beforeAnswer first.
    const toClient = (chunk: Buffer): void => {
      if (exchange === undefined && gate === undefined) return forward(upstream, client, chunk);
      (gate ??= []).push(chunk);
      openGate(false);
    };
    const openGate = (ended: boolean): void => {
      const hook = this.options.beforeAnswer;
      const seen = exchange;
      if (hook === undefined || seen === undefined || gate === undefined) return;
      const head = Buffer.concat(gate);
      if (!ended && head.indexOf('\r\n\r\n') === -1 && head.length < HEAD_LIMIT) return;
      exchange = undefined;
      void Promise.resolve()
        .then(() => hook(seen, head))
        .catch(() => undefined)
        .then(() => {
          const chunks = gate ?? [];
          gate = undefined;
          for (const c of chunks) forward(upstream, client, c);
          if (upstreamEnded && held === undefined) client.end();
        });
    };

    client.on('end', () => upstream.end());
    upstream.on('end', () => {
      upstreamEnded = true;
      if (gate !== undefined) openGate(true);
      else if (held === undefined) client.end();
    });
  }

  private decide(seen: Omit<Exchange, 'occurrence'>): ExchangeRecord {
    const identity = seen.key ?? '';
    const occurrence = seen.key === undefined ? this.keyless++ : (this.seen.get(identity) ?? 0);
    if (seen.key !== undefined) this.seen.set(identity, occurrence + 1);
    const exchange: Exchange = { ...seen, occurrence };
    let fault = this.options.decide?.(exchange) ?? this.draw(identity, occurrence);
    if (fault !== 'pass' && seen.key !== undefined) {
      const count = this.faulted.get(identity) ?? 0;
      if (count >= (this.options.maxFaultsPerKey ?? Infinity)) fault = 'pass';
      else this.faulted.set(identity, count + 1);
    }
    const record = { ...exchange, fault };
    this.records.push(record);
    return record;
  }

  /** A uniform draw from (seed, key, occurrence), mapped onto the fault shares. */
  private draw(identity: string, occurrence: number): Fault {
    const digest = createHash('sha256')
      .update(`${this.options.seed ?? 1}\0${identity}\0${occurrence}`)
      .digest();
    let u = digest.readUInt32BE(0) / 0x1_0000_0000;
    for (const fault of FAULT_ORDER) {
      const share = this.options.faults?.[fault] ?? 0;
      if (u < share) return fault;
      u -= share;
    }
    return 'pass';
  }
}

/** Writes with backpressure: a slow reader pauses the writer's source. */
function forward(from: net.Socket, to: net.Socket, chunk: Buffer): void {
  if (to.destroyed) return;
  if (!to.write(chunk)) {
    from.pause();
    to.once('drain', () => from.resume());
  }
}

/**
 * The request line and `header`'s value once the HTTP/1.x head is complete;
 * 'incomplete' while it may still be; key and line undefined when it is not HTTP.
 */
function peekHead(
  bytes: Buffer,
  header: string,
): { key: string | undefined; requestLine: string | undefined } | 'incomplete' {
  const end = bytes.indexOf('\r\n\r\n');
  const text = bytes.subarray(0, end === -1 ? Math.min(bytes.length, HEAD_LIMIT) : end);
  const start = text.toString('latin1', 0, 16);
  const looksHttp = /^[A-Z]{1,10} /.test(start) || /^[A-Z]{0,10}$/.test(start);
  if (!looksHttp) return { key: undefined, requestLine: undefined };
  if (end === -1) return 'incomplete';
  const [requestLine, ...lines] = text.toString('latin1').split('\r\n');
  const name = header.toLowerCase();
  for (const line of lines) {
    const colon = line.indexOf(':');
    if (colon > 0 && line.slice(0, colon).trim().toLowerCase() === name)
      return { key: line.slice(colon + 1).trim(), requestLine };
  }
  return { key: undefined, requestLine };
}
