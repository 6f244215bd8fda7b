import { createHash } from 'node:crypto';
import http from 'node:http';
import type net from 'node:net';

/**
 * A real HTTP server on loopback with a minimal in-memory Idempotency-Key store, the
 * behaviour idempotentFetch is written against (effectively-once/http's, simplified):
 * the effect and the stored response happen together, then the response is sent; a
 * repeat with the same body replays it with `Idempotent-Replayed: true`; a different
 * body is 422; a repeat while the original runs is 409 + `Retry-After`; a failed
 * original stores nothing.
 */
export interface Arrival {
  key: string | undefined;
  /** The raw header value (quotes and all). */
  rawKey: string | undefined;
  path: string;
  method: string;
  bodySha256: string;
  contentType: string | undefined;
  /** What the server answered. */
  outcome: 'applied' | 'replayed' | 'in-progress' | 'mismatch' | 'intercepted' | 'no-key';
}

export interface CannedResponse {
  status: number;
  headers?: Record<string, string>;
  body?: string;
}

export interface IdempotencyServerOptions {
  /** The key header. Default `idempotency-key`. */
  header?: string;
  /**
   * Called for each arrival before the store; a returned response is sent instead
   * and nothing is stored (a 503 here is a rolled-back attempt).
   */
  intercept?: (arrival: Omit<Arrival, 'outcome'>, nth: number) => CannedResponse | undefined;
  /** Awaited between the claim and the effect: hold it to keep an original "running". */
  beforeEffect?: (key: string) => Promise<void>;
  /** `Retry-After` of the 409 "still in progress". Default `0`. */
  inProgressRetryAfter?: string;
}

interface StoredRecord {
  fingerprint: string;
  response: { status: number; body: string } | undefined; // undefined while running
}

export class IdempotencyServer {
  readonly arrivals: Arrival[] = [];
  /** How many times each key's effect was applied. */
  readonly effects = new Map<string, number>();
  private readonly records = new Map<string, StoredRecord>();

  private constructor(
    private readonly server: http.Server,
    private readonly options: IdempotencyServerOptions,
  ) {}

  static async start(options: IdempotencyServerOptions = {}): Promise<IdempotencyServer> {
    const server = http.createServer();
    const instance = new IdempotencyServer(server, options);
    server.on('request', (req, res) => {
      instance.handle(req, res).catch((error: unknown) => {
        res.destroy(error instanceof Error ? error : undefined);
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return instance;
  }

  get port(): number {
    return (this.server.address() as net.AddressInfo).port;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** The arrivals that carried `key`, in order. */
  arrivalsFor(key: string): Arrival[] {
    return this.arrivals.filter((a) => a.key === key);
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks);
    const rawKey = header(req, this.options.header ?? 'idempotency-key');
    const seen: Omit<Arrival, 'outcome'> = {
      key: rawKey === undefined ? undefined : rawKey.replace(/^"(.*)"$/, '$1'),
      rawKey,
      path: req.url ?? '/',
      method: req.method ?? 'GET',
      bodySha256: createHash('sha256').update(body).digest('hex'),
      contentType: req.headers['content-type'],
    };
    const nth = this.arrivals.filter((a) => a.key === seen.key && a.path === seen.path).length;
    const arrival: Arrival = { ...seen, outcome: 'intercepted' };
    this.arrivals.push(arrival);

    const canned = this.options.intercept?.(seen, nth);
    if (canned) return send(res, canned);
    const key = seen.key;
    if (key === undefined) {
      arrival.outcome = 'no-key';
      return send(res, problem(400, 'Idempotency-Key required'));
    }
    const fingerprint = `${seen.method} ${seen.path} ${seen.bodySha256}`;
    const record = this.records.get(key);
    if (record !== undefined) {
      if (record.fingerprint !== fingerprint) {
        arrival.outcome = 'mismatch';
        return send(res, problem(422, 'key reused with another request'));
      }
      if (record.response === undefined) {
        arrival.outcome = 'in-progress';
        return send(res, {
          ...problem(409, 'original request still in progress'),
          headers: {
            'content-type': 'application/problem+json',
            'retry-after': this.options.inProgressRetryAfter ?? '0',
          },
        });
      }
      arrival.outcome = 'replayed';
      return send(res, {
        ...record.response,
        headers: { 'content-type': 'application/json', 'idempotent-replayed': 'true' },
      });
    }

    const claim: StoredRecord = { fingerprint, response: undefined };
    this.records.set(key, claim);
    try {
      await this.options.beforeEffect?.(key);
    } catch {
      this.records.delete(key); // rolled back: the key is free again
      return send(res, problem(503, 'rolled back'));
    }
    // The effect and the stored response together, then the answer: a "commit".
    const applied = (this.effects.get(key) ?? 0) + 1;
    this.effects.set(key, applied);
    claim.response = {
      status: 201,
      body: JSON.stringify({
        id: `ch_${this.effects.size}`,
        key,
        applied,
        bodySha256: seen.bodySha256,
      }),
    };
    arrival.outcome = 'applied';
    send(res, { ...claim.response, headers: { 'content-type': 'application/json' } });
  }
}

function header(req: http.IncomingMessage, name: string): string | undefined {
  const value = req.headers[name.toLowerCase()];
  return Array.isArray(value) ? value[0] : value;
}

function problem(status: number, title: string): CannedResponse {
  return {
    status,
    headers: { 'content-type': 'application/problem+json' },
    body: JSON.stringify({ type: 'about:blank', title, status }),
  };
}

function send(res: http.ServerResponse, response: CannedResponse): void {
  res.writeHead(response.status, response.headers ?? {});
  res.end(response.body ?? '');
}
