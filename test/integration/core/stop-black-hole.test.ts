/**
 * `stop({ timeoutMs })` while a claim's round trip is never answered: Postgres
 * black-holed (a network partition, an old primary's address gone without a reset: the
 * socket stays open, nothing comes back; Linux gives up on it after ~15 min). The docs:
 * at the deadline what still runs is given up on ("no handler can hold stop() open"; a
 * COMMIT still running is abandoned), then stop() resolves. The claim statement, the
 * ROLLBACK and the stored-hash read were awaited without the hard stop: stop() hung.
 *
 * The black hole is a loopback TCP proxy in front of Postgres that, once switched (by
 * hand, or when the client sends a chosen statement), forwards nothing either way and
 * keeps every socket open.
 */
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { createConsumer, migrate } from '../../../src/index.js';
import { memorySource } from '../../../src/testing/index.js';
import { createTestDatabase, type TestDatabase } from '../../helpers/db.js';
import { databaseUrl } from '../../helpers/env.js';
import { waitFor } from '../../helpers/wait-for.js';

let db: TestDatabase;
/** Once set, forwards nothing either way. */
let blackHole = false;
/** When the client sends a chunk holding this text, the black hole starts (with it). */
let blackHoleAt: string | undefined;
const sockets = new Set<net.Socket>();
const upstream = new URL(databaseUrl());
const proxy = net.createServer((client) => {
  const server = net.connect(Number(upstream.port || 5432), upstream.hostname);
  sockets.add(client);
  sockets.add(server);
  client.on('data', (d: Buffer) => {
    if (blackHoleAt !== undefined && d.includes(blackHoleAt)) blackHole = true;
    if (!blackHole) server.write(d);
  });
  server.on('data', (d) => {
    if (!blackHole) client.write(d);
  });
  const end = () => {
    client.destroy();
    server.destroy();
  };
  client.on('error', end);
  server.on('error', end);
  client.on('close', end);
  server.on('close', end);
});

beforeAll(async () => {
  db = await createTestDatabase('stop_black_hole');
  await migrate(db.pool, { schema: db.schema });
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', () => resolve()));
});
afterAll(async () => {
  for (const s of sockets) s.destroy();
  await new Promise<void>((resolve) => proxy.close(() => resolve()));
  await db.close();
});

interface Case {
  /** The round trip that gets no answer. */
  what: string;
  batch?: { maxSize: number; maxWaitMs: number };
  payloadHash?: boolean;
  /** The statement that starts the black hole; undefined: before the second send. */
  at: string | undefined;
  /** The second delivery's key: `a` again makes it a duplicate of the first. */
  second: string;
  /**
   * Where the second delivery ends: `queued` (released, given up on before anything was
   * known) or `acked` (a duplicate whose empty transaction's ROLLBACK was given up on).
   */
  ends: 'queued' | 'acked';
}

const cases: Case[] = [
  { what: 'the claim', at: undefined, second: 'b', ends: 'queued' },
  {
    what: 'the claim (batch mode)',
    batch: { maxSize: 10, maxWaitMs: 20 },
    at: undefined,
    second: 'b',
    ends: 'queued',
  },
  {
    what: "a duplicate's stored-hash read",
    at: 'SELECT encode(payload_hash',
    second: 'a',
    ends: 'queued',
  },
  {
    what: "a duplicate's ROLLBACK",
    payloadHash: false,
    at: 'ROLLBACK',
    second: 'a',
    ends: 'acked',
  },
];

describe('stop() while Postgres answers nothing', () => {
  it.each(cases)(
    '$what: resolves by its deadline, the delivery $ends',
    async ({ what, batch, payloadHash, at, second: secondKey, ends }) => {
      blackHole = false;
      blackHoleAt = undefined;
      const port = (proxy.address() as net.AddressInfo).port;
      const url = new URL(databaseUrl());
      url.hostname = '127.0.0.1';
      url.port = String(port);
      const pool = new pg.Pool({
        connectionString: url.toString(),
        max: 4,
        options: `-c search_path=${db.schema}`,
      });
      pool.on('error', () => undefined);
      const source = memorySource<{ id: string }>();
      let handled = 0;
      const consumer = createConsumer<{ id: string }>({
        // Not the case's title: the claim carries the name, and must not hold the marker.
        name: `stop-black-hole-${cases.findIndex((c) => c.what === what)}`,
        source,
        pool,
        schema: db.schema,
        ...(batch === undefined ? {} : { batch }),
        ...(payloadHash === undefined ? {} : { payloadHash }),
        handler: async () => {
          handled++;
        },
      });
      consumer.on('error', () => undefined);
      await consumer.start();
      const first = source.send({ id: 'a' }, { key: 'a' });
      await waitFor(() => first.state === 'acked', { what: 'a processed through the proxy' });

      if (at === undefined) blackHole = true;
      else blackHoleAt = at;
      const second = source.send({ id: secondKey }, { key: secondKey });
      await waitFor(() => consumer.stats().received === 2 && blackHole, {
        what: `${what} sent into the black hole`,
      });
      const stopping = consumer.stop({ timeoutMs: 1000 }).then(() => 'stopped' as const);
      try {
        const outcome = await Promise.race([
          stopping,
          new Promise<'still waiting'>((r) => setTimeout(() => r('still waiting'), 15_000).unref()),
        ]);
        expect({ outcome, handled, second: second.state }).toEqual({
          outcome: 'stopped',
          handled: 1,
          second: ends,
        });
      } finally {
        for (const s of sockets) s.destroy(); // the partition ends: let everything finish
        await stopping;
        await pool.end();
      }
    },
    60_000,
  );
});
