import net from 'node:net';
import { FrameReader, claimCommitXid, commandTag, queryText } from './pg-wire.js';

/** When an armed proxy gives a COMMIT up to the nemesis: as it is sent, or once answered. */
export type CommitArm = 'sent' | 'answered';

/** A claim's COMMIT the proxy caught for the nemesis; its answer never reaches the client. */
export interface CaughtCommit {
  /** The claim transaction's id (from the COMMIT round trip), for `pg_xact_status`. */
  xid: string;
  arm: CommitArm;
  /** `answered`: the server's last command tag (`COMMIT`, or `ROLLBACK`). */
  tag: string | undefined;
}

/** A COMMIT that was on a connection when it was cut: its client never heard the outcome. */
export interface CutCommit {
  xid: string;
}

interface Connection {
  client: net.Socket;
  upstream: net.Socket;
  /** The xid of a claim COMMIT sent and not yet answered. */
  inFlight: string | undefined;
  /** The xid of a COMMIT whose answer was withheld from the client (an armed one). */
  withheld: string | undefined;
  /** The armed COMMIT on this connection waits for its answer. */
  waiting: Arm | undefined;
  /** The last CommandComplete tag since the COMMIT was sent. */
  tag: string | undefined;
}

interface Arm {
  mode: CommitArm;
  resolve: (commit: CaughtCommit) => void;
}

/**
 * The loopback TCP proxy the workers reach Postgres through: it stands in for the
 * DNS name, HAProxy or pgbouncer that a real failover moves from the old primary to
 * the new one. `retarget` points it at another server and cuts every open connection
 * (nobody keeps talking to the old node); `cut` cuts them and resets new ones until
 * the next `retarget`. `stall` holds every byte both ways (the replication link of a
 * standby falling behind).
 *
 * With `watchCommits` it reads the frontend's simple queries and the backend's
 * answers (pg-wire.ts, nothing is altered) to know which connections have a claim's
 * COMMIT in flight, so a failover can say which COMMITs it left unknown, and so the
 * nemesis can fire right after a COMMIT is sent or answered (`armCommit`).
 */
export class PgProxy {
  private target: number | undefined;
  private stalled = false;
  private readonly connections = new Set<Connection>();
  private arm: Arm | undefined;
  private cutCommits: CutCommit[] = [];
  /** Connections accepted, and those reset because no server was behind the proxy. */
  readonly counts = { accepted: 0, refused: 0 };

  private constructor(
    private readonly server: net.Server,
    readonly port: number,
    target: number | undefined,
    private readonly watchCommits: boolean,
  ) {
    this.target = target;
  }

  /** A proxy on a free loopback port, forwarding to `target` (a port on 127.0.0.1). */
  static async start(
    target: number | undefined,
    options: { watchCommits?: boolean } = {},
  ): Promise<PgProxy> {
    const server = net.createServer();
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', resolve);
    });
    const { port } = server.address() as net.AddressInfo;
    const proxy = new PgProxy(server, port, target, options.watchCommits === true);
    // Nobody knows the port before this returns: no connection can come earlier.
    server.on('connection', (client) => proxy.accept(client));
    return proxy;
  }

  /** `url` with the proxy's host and port. */
  url(url: string): string {
    const u = new URL(url);
    u.hostname = '127.0.0.1';
    u.port = String(this.port);
    return u.toString();
  }

  /** Cuts every connection; new ones go to `port`. */
  retarget(port: number): void {
    this.cut();
    this.target = port;
  }

  /** Cuts every connection; new ones are reset until `retarget`. */
  cut(): void {
    this.target = undefined;
    for (const c of [...this.connections]) this.drop(c);
  }

  /** Holds every byte, both ways, on every connection (new ones too) until `unstall`. */
  stall(): void {
    this.stalled = true;
    for (const c of this.connections) for (const s of [c.client, c.upstream]) s.pause();
  }

  unstall(): void {
    this.stalled = false;
    for (const c of this.connections) for (const s of [c.client, c.upstream]) s.resume();
  }

  /**
   * Resolves at the next claim COMMIT: `sent` as soon as it went to the server,
   * `answered` once the server's answer arrived. Either way the answer is withheld
   * from the client, whose connection stays open, silent, until it is cut.
   */
  armCommit(mode: CommitArm): Promise<CaughtCommit> {
    if (!this.watchCommits) throw new Error('armCommit needs a proxy started with watchCommits');
    return new Promise((resolve) => (this.arm = { mode, resolve }));
  }

  /** An `armCommit` waits for its COMMIT. */
  get armed(): boolean {
    return this.arm !== undefined;
  }

  disarm(): void {
    this.arm = undefined;
  }

  /** COMMITs that were in flight on connections closed since the last call. */
  takeCutCommits(): CutCommit[] {
    const taken = this.cutCommits;
    this.cutCommits = [];
    return taken;
  }

  async stop(): Promise<void> {
    this.cut();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private accept(client: net.Socket): void {
    if (this.target === undefined) {
      this.counts.refused++;
      client.on('error', () => undefined);
      client.resetAndDestroy();
      return;
    }
    this.counts.accepted++;
    const upstream = net.connect(this.target, '127.0.0.1');
    const c: Connection = {
      client,
      upstream,
      inFlight: undefined,
      withheld: undefined,
      waiting: undefined,
      tag: undefined,
    };
    this.connections.add(c);
    for (const s of [client, upstream]) {
      s.setNoDelay(true);
      s.on('error', () => this.drop(c));
      s.on('close', () => this.drop(c));
      if (this.stalled) s.pause();
    }
    const front = this.watchCommits ? new FrameReader(true, (t) => t === 'Q') : undefined;
    const back = this.watchCommits ? new FrameReader(false, (t) => t === 'C') : undefined;
    client.on('data', (chunk: Buffer) => {
      this.forward(client, upstream, chunk);
      for (const frame of front?.push(chunk) ?? []) if (frame.body) this.sent(c, frame.body);
    });
    upstream.on('data', (chunk: Buffer) => {
      if (c.withheld === undefined) this.forward(upstream, client, chunk);
      for (const frame of back?.push(chunk) ?? []) {
        if (frame.type === 'C' && frame.body) c.tag = commandTag(frame.body);
        if (frame.type === 'Z') this.answered(c);
      }
    });
    client.on('end', () => upstream.end());
    upstream.on('end', () => client.end());
  }

  /** A simple query went to the server (already forwarded). */
  private sent(c: Connection, body: Buffer): void {
    const xid = claimCommitXid(queryText(body));
    if (xid === undefined) return;
    c.inFlight = xid;
    c.tag = undefined;
    const arm = this.arm;
    if (arm === undefined) return;
    this.arm = undefined;
    c.withheld = xid;
    if (arm.mode === 'sent') arm.resolve({ xid, arm: 'sent', tag: undefined });
    else c.waiting = arm;
  }

  /** ReadyForQuery: the COMMIT in flight on `c`, if any, is answered (maybe withheld). */
  private answered(c: Connection): void {
    const xid = c.inFlight;
    c.inFlight = undefined;
    const arm = c.waiting;
    if (arm === undefined || xid === undefined) return;
    c.waiting = undefined;
    arm.resolve({ xid, arm: 'answered', tag: c.tag });
  }

  private drop(c: Connection): void {
    if (!this.connections.delete(c)) return;
    // Its client never heard how this COMMIT ended: in flight, or answered and withheld.
    const unknown = c.inFlight ?? c.withheld;
    if (unknown !== undefined) this.cutCommits.push({ xid: unknown });
    c.client.destroy();
    c.upstream.destroy();
  }

  /** Writes with backpressure: a slow reader pauses the writer's source (a stall wins). */
  private forward(from: net.Socket, to: net.Socket, chunk: Buffer): void {
    if (to.destroyed) return;
    if (!to.write(chunk)) {
      from.pause();
      to.once('drain', () => {
        if (!this.stalled) from.resume();
      });
    }
  }
}
