import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, expect } from '@jest/globals';
import {
  createIdempotency,
  type Idempotency,
  type IdempotencyOptions,
} from 'effectively-once/http';
import { createTestDatabase, type TestDatabase } from '../../helpers/db.js';

/**
 * A ledger whose `charges` reference `customers` through a deferred foreign key: a
 * charge for an unknown customer is accepted by its INSERT and refused by COMMIT.
 * `cus_ok` exists; a test adds others to let a retry commit.
 */
const LEDGER = `
  CREATE TABLE customers (id text PRIMARY KEY);
  CREATE TABLE charges (
    id          bigserial PRIMARY KEY,
    idem_key    text NOT NULL,
    customer_id text NOT NULL REFERENCES customers (id) DEFERRABLE INITIALLY DEFERRED,
    note        text
  );
  INSERT INTO customers (id) VALUES ('cus_ok');`;

export const CHARGE =
  'INSERT INTO charges (idem_key, customer_id, note) VALUES ($1, $2, $3) RETURNING id';

/** What a test file gets: the database, endpoints and servers closed after each test. */
export interface CompletionFixture {
  db(): TestDatabase;
  /** An endpoint family on the file's schema; `onCommitted` also sets {@link committed}. */
  endpoint(options?: Partial<IdempotencyOptions>): Idempotency;
  /** Keys whose COMMIT has happened (set before the response is handed back). */
  committed: Set<string>;
  /** Listens on a free loopback port; closed after the test. */
  listen(server: http.Server): Promise<string>;
  /** Closed after the test (a Fastify app, say). */
  later(close: () => Promise<void>): void;
  charges(key: string): Promise<number>;
  addCustomer(id: string): Promise<void>;
}

export function completionFixture(prefix: string): CompletionFixture {
  let db: TestDatabase | undefined;
  const closers: Array<() => Promise<void>> = [];
  const committed = new Set<string>();
  beforeAll(async () => {
    db = await createTestDatabase(prefix, { max: 20 });
    await db.pool.query(LEDGER);
  });
  afterEach(async () => {
    for (const close of closers.splice(0).reverse()) await close();
  });
  afterAll(async () => db?.close());
  const get = (): TestDatabase => {
    if (db === undefined) throw new Error('no database yet');
    return db;
  };
  return {
    db: get,
    committed,
    endpoint(options = {}) {
      const idempotency = createIdempotency({
        pool: get().pool,
        schema: get().schema,
        scope: 'ledger',
        retention: false,
        onCommitted: ({ key }) => void committed.add(key),
        ...options,
      });
      closers.push(() => idempotency.close());
      return idempotency;
    },
    async listen(server) {
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      closers.push(
        () =>
          new Promise<void>((resolve) => {
            server.closeAllConnections();
            server.close(() => resolve());
          }),
      );
      return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    },
    later(close) {
      closers.push(close);
    },
    async charges(key) {
      const { rows } = await get().pool.query<{ n: number }>(
        'SELECT count(*)::int AS n FROM charges WHERE idem_key = $1',
        [key],
      );
      return rows[0]?.n ?? -1;
    },
    async addCustomer(id) {
      await get().pool.query('INSERT INTO customers (id) VALUES ($1) ON CONFLICT DO NOTHING', [id]);
    },
  };
}

/** An answer read whole, and whether its key had committed when its head arrived. */
export interface Observed {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
  /** The key's COMMIT had happened when the status line reached the client. */
  committedAtHead: boolean;
}

/**
 * POSTs with node:http (the head is observed the moment it arrives, which fetch does
 * not show) and reads the body whole.
 */
export function observe(
  url: string,
  key: string,
  body: unknown,
  committed: ReadonlySet<string>,
): Promise<Observed> {
  const payload = typeof body === 'string' ? body : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const request = http.request(
      url,
      {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'idempotency-key': key,
          'content-length': Buffer.byteLength(payload),
        },
      },
      (response) => {
        const committedAtHead = committed.has(key);
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('error', reject);
        response.on('end', () =>
          resolve({
            status: response.statusCode ?? 0,
            headers: response.headers,
            body: Buffer.concat(chunks),
            committedAtHead,
          }),
        );
      },
    );
    request.on('error', reject);
    request.end(payload);
  });
}

/**
 * A streamed answer that fails after COMMIT: the response is cut (never ended cleanly),
 * the effect committed once, and the retry gets the replay, marked `stream`.
 */
export async function expectCutThenReplayed(
  fixture: CompletionFixture,
  url: string,
): Promise<void> {
  const key = randomUUID();
  await expect(observe(url, key, {}, fixture.committed)).rejects.toThrow(/aborted|reset|socket/i);
  expect(await fixture.charges(key)).toBe(1);
  const replay = await observe(url, key, {}, fixture.committed);
  expect(replay.status).toBe(200);
  expect(replay.headers['idempotent-body-omitted']).toBe('stream');
}

/**
 * This process's open file descriptors on the library's spill files (Linux: /proc;
 * elsewhere an empty list, the check is then vacuous).
 */
export function openSpillFiles(): string[] {
  const dir = '/proc/self/fd';
  if (!fs.existsSync(dir)) return [];
  const open: string[] = [];
  for (const fd of fs.readdirSync(dir)) {
    try {
      const target = fs.readlinkSync(`${dir}/${fd}`);
      if (/effectively-once-[^/]*\.body/.test(target)) open.push(target);
    } catch {
      // Closed while listing.
    }
  }
  return open;
}
