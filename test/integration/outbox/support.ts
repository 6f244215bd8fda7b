import http from 'node:http';
import type net from 'node:net';
import type pg from 'pg';
import { afterAll, afterEach, beforeAll, beforeEach } from '@jest/globals';
import {
  createRelay,
  enqueue,
  httpPublisher,
  migrateOutbox,
  type OutboxMessage,
  type Relay,
  type RelayOptions,
} from 'effectively-once/outbox';
import { runCli } from '../../../src/cli/run.js';
import { createTestDatabase, databaseUrl, type TestDatabase } from '../../helpers/db.js';

/** One request the receiver answered. */
export interface Received {
  key: string;
  orderingKey: string | undefined;
  body: { k?: string; n?: number; [field: string]: unknown };
  status: number;
}

/**
 * The downstream HTTP service of the outbox tests, on loopback. `respond` picks each
 * request's status; `holdFirst` keeps the first request of every Idempotency-Key
 * unanswered until `release(status)` (a relay stuck in its publish).
 */
export class Receiver {
  readonly all: Received[] = [];
  readonly held: { key: string; answer: (status: number) => void }[] = [];
  holdFirst = false;
  respond: (request: Omit<Received, 'status'>, attempt: number) => number = () => 200;
  private readonly server = http.createServer((req, res) => void this.handle(req, res));
  private readonly attempts = new Map<string, number>();
  url = '';

  async start(): Promise<void> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as net.AddressInfo).port}/effects`;
  }

  /** Requests answered 2xx, in arrival order. */
  get accepted(): Received[] {
    return this.all.filter((r) => r.status < 300);
  }

  /** The `n` of the accepted requests of ordering key `k`, in arrival order. */
  acceptedOf(k: string): number[] {
    return this.accepted.filter((r) => r.body.k === k).map((r) => r.body.n ?? -1);
  }

  /** Answers every held request with `status`. */
  release(status: number): void {
    for (const h of this.held.splice(0)) h.answer(status);
  }

  async close(): Promise<void> {
    this.release(503);
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const key = String(req.headers['idempotency-key'] ?? '');
    const orderingKey = req.headers['x-ordering-key'] as string | undefined;
    const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Received['body'];
    const attempt = (this.attempts.get(key) ?? 0) + 1;
    this.attempts.set(key, attempt);
    const status =
      this.holdFirst && attempt === 1
        ? await new Promise<number>((answer) => this.held.push({ key, answer }))
        : this.respond({ key, orderingKey, body }, attempt);
    this.all.push({ key, orderingKey, body, status });
    res.writeHead(status, { 'content-type': 'text/plain' }).end(String(status));
  }
}

/** Enqueues each message in its own committed transaction, in order; returns the ids. */
export async function enqueueCommitted(
  pool: pg.Pool,
  messages: OutboxMessage[],
  schema: string,
): Promise<string[]> {
  const ids: string[] = [];
  for (const message of messages) {
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      ids.push(await enqueue(client, message, { schema }));
      await client.query('COMMIT');
    } finally {
      client.release();
    }
  }
  return ids;
}

/** Runs the command line against the tests' database; its exit code and output. */
export async function cli(argv: string[]): Promise<{ code: number; stdout: string }> {
  const out: string[] = [];
  const code = await runCli(argv, {
    stdout: (t) => out.push(t),
    stderr: (t) => out.push(t),
    env: { DATABASE_URL: databaseUrl() },
    signal: new AbortController().signal,
  });
  return { code, stdout: out.join('\n') };
}

/** What {@link outboxTestBed} gives a test file. */
export interface OutboxTestBed {
  /** A schema of the file's own, with the outbox table (emptied before each test). */
  readonly db: TestDatabase;
  /** This test's receiver (a new one per test). */
  readonly receiver: Receiver;
  /**
   * A relay on the file's outbox table, publishing destination `effects` to the
   * receiver (one attempt per publish, ms backoff) unless `options` say otherwise;
   * stopped after the test.
   */
  relay(options?: Partial<RelayOptions>): Relay;
}

/** Registers a test file's set-up: a database schema with the outbox, a receiver per test. */
export function outboxTestBed(prefix: string): OutboxTestBed {
  let db: TestDatabase | undefined;
  let receiver: Receiver | undefined;
  const relays: Relay[] = [];
  beforeAll(async () => {
    db = await createTestDatabase(prefix);
    await migrateOutbox(db.pool, { schema: db.schema });
  });
  afterAll(async () => {
    await db?.close();
  });
  beforeEach(async () => {
    receiver = new Receiver();
    await receiver.start();
    await db!.pool.query(`TRUNCATE ${db!.table('eo_outbox')}`);
  });
  afterEach(async () => {
    await Promise.all(relays.splice(0).map((r) => r.stop()));
    await receiver?.close();
  });
  return {
    get db() {
      return db!;
    },
    get receiver() {
      return receiver!;
    },
    relay(options = {}) {
      const r = createRelay({
        pool: db!.pool,
        schema: db!.schema,
        publishers: { effects: httpPublisher({ url: receiver!.url, fetch: { attempts: 1 } }) },
        backoff: { initialMs: 5, maxMs: 20 },
        ...options,
      });
      relays.push(r);
      return r;
    },
  };
}
