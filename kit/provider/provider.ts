/**
 * A payment provider of the tests' own, on loopback: POST /charges deduplicates by its
 * `Idempotency-Key` header (the same key gets the same charge, applied once, as Stripe
 * does), counts what it applied per key, and fails on demand (a delay past the
 * client's timeout, a 5xx before or after applying, an answer dropped after applying,
 * a decline). Steps' tests and the chaos harness drive their flows against it and
 * check its record: no key ever charged twice.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** What the provider does to one request, instead of answering it plainly. */
export type ProviderFault =
  /** Apply, then answer after `delayMs` (past the client's timeout: the client gives up). */
  | { kind: 'delay'; delayMs: number }
  /** Answer 503 without applying anything. */
  | { kind: '5xx-before' }
  /** Apply, then answer 500 (the client cannot tell it applied). */
  | { kind: '5xx-after' }
  /** Apply, then destroy the socket without an answer. */
  | { kind: 'drop-after' }
  /** Decline the card: 402, recorded for the key (a retry with it is declined again). */
  | { kind: 'decline' };

/** One charge as the provider records it. */
export interface Charge {
  id: string;
  key: string;
  amount: number;
  /** Whatever else the request's JSON body carried. */
  request: Record<string, unknown>;
}

/** Decides a fault for a request (`attempt`: the how-manieth request with this key, from 1). */
export type FaultPolicy = (key: string, attempt: number) => ProviderFault | undefined;

/** A running provider. */
export interface Provider {
  /** `http://127.0.0.1:<port>` */
  readonly url: string;
  readonly port: number;
  /** How many charges were applied under `key` (0 or 1, unless deduplication broke). */
  applied(key: string): number;
  /** Requests received with `key`, applied or not. */
  requests(key: string): number;
  /** The charge recorded for `key`, if any. */
  charge(key: string): Charge | undefined;
  /** Whether `key` was declined. */
  declined(key: string): boolean;
  /** Every key charged, with how many times (a value above 1 is a double charge). */
  appliedByKey(): ReadonlyMap<string, number>;
  /**
   * Queues `fault` for the next `times` requests (of `key` only, if given), before any
   * policy: tests make one boundary fail exactly.
   */
  inject(fault: ProviderFault, options?: { key?: string; times?: number }): void;
  /** A fault for every request the queue does not decide (the chaos harness's random faults). */
  setPolicy(policy: FaultPolicy | undefined): void;
  /** Stops listening and ends open connections. */
  close(): Promise<void>;
}

/** Options of {@link startProvider}. */
export interface ProviderOptions {
  /** Default 0: a free port. */
  port?: number;
}

/** Starts the provider on 127.0.0.1. */
export async function startProvider(options: ProviderOptions = {}): Promise<Provider> {
  const charges = new Map<string, Charge>();
  const declines = new Set<string>();
  const appliedCount = new Map<string, number>();
  const requestCount = new Map<string, number>();
  const queue: Array<{ fault: ProviderFault; key: string | undefined; left: number }> = [];
  let policy: FaultPolicy | undefined;
  let next = 1;

  const faultFor = (key: string, attempt: number): ProviderFault | undefined => {
    const index = queue.findIndex((q) => q.key === undefined || q.key === key);
    if (index >= 0) {
      const queued = queue[index]!;
      if (--queued.left <= 0) queue.splice(index, 1);
      return queued.fault;
    }
    return policy?.(key, attempt);
  };

  const apply = (key: string, body: Record<string, unknown>): Charge => {
    const existing = charges.get(key);
    if (existing !== undefined) return existing;
    const amount = typeof body.amount === 'number' ? body.amount : 0;
    const charge: Charge = { id: `ch_${next++}`, key, amount, request: body };
    charges.set(key, charge);
    appliedCount.set(key, (appliedCount.get(key) ?? 0) + 1);
    return charge;
  };

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const url = new URL(req.url ?? '/', 'http://provider');
    if (req.method === 'GET' && url.pathname === '/charges') {
      const key = url.searchParams.get('key') ?? '';
      return json(res, 200, {
        key,
        applied: appliedCount.get(key) ?? 0,
        requests: requestCount.get(key) ?? 0,
        charge: charges.get(key) ?? null,
        declined: declines.has(key),
      });
    }
    if (req.method !== 'POST' || url.pathname !== '/charges')
      return json(res, 404, { error: { code: 'not_found' } });
    const key = req.headers['idempotency-key'];
    if (typeof key !== 'string' || key === '')
      return json(res, 400, { error: { code: 'idempotency_key_missing' } });
    let body: Record<string, unknown>;
    try {
      body = JSON.parse(await readAll(req)) as Record<string, unknown>;
      if (typeof body !== 'object' || body === null) throw new Error('not an object');
    } catch {
      return json(res, 400, { error: { code: 'invalid_json' } });
    }
    const attempt = (requestCount.get(key) ?? 0) + 1;
    requestCount.set(key, attempt);
    const declinedBefore = declines.has(key);
    const recorded = charges.get(key);
    if (recorded !== undefined && JSON.stringify(recorded.request) !== JSON.stringify(body))
      return json(res, 422, { error: { code: 'idempotency_key_reused' } });
    // A key already answered gets its answer again, whatever the faults: deduplication.
    if (declinedBefore) return json(res, 402, { error: { code: 'card_declined' } });
    const fault = recorded === undefined ? faultFor(key, attempt) : undefined;
    switch (fault?.kind) {
      case '5xx-before':
        return json(res, 503, { error: { code: 'unavailable' } });
      case 'decline':
        declines.add(key);
        return json(res, 402, { error: { code: 'card_declined' } });
      case '5xx-after':
        apply(key, body);
        return json(res, 500, { error: { code: 'internal' } });
      case 'drop-after':
        apply(key, body);
        res.socket?.destroy();
        return;
      case 'delay': {
        const charge = apply(key, body);
        await new Promise((resolve) => setTimeout(resolve, fault.delayMs));
        return json(res, 200, charge);
      }
      case undefined: {
        const replayed = recorded !== undefined;
        const charge = apply(key, body);
        return json(res, replayed ? 200 : 201, charge, replayed);
      }
    }
  };

  const server: Server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      if (!res.headersSent) json(res, 500, { error: { code: 'bug', message: String(error) } });
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, '127.0.0.1', () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    applied: (key) => appliedCount.get(key) ?? 0,
    requests: (key) => requestCount.get(key) ?? 0,
    charge: (key) => charges.get(key),
    declined: (key) => declines.has(key),
    appliedByKey: () => new Map(appliedCount),
    inject: (fault, opts = {}) =>
      queue.push({ fault, key: opts.key, left: Math.max(1, opts.times ?? 1) }),
    setPolicy: (p) => {
      policy = p;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

function json(res: ServerResponse, status: number, body: unknown, replayed = false): void {
  const bytes = Buffer.from(JSON.stringify(body));
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': bytes.byteLength,
    ...(replayed ? { 'idempotent-replayed': 'true' } : {}),
  });
  res.end(bytes);
}

async function readAll(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}
