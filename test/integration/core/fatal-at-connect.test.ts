/**
 * A backend terminated while its connection starts (`pg_terminate_backend`, a Postgres
 * shutdown) can send its FATAL in the same TCP chunk as the ReadyForQuery that ends the
 * startup. pg-pool hands the new client out from inside that chunk's data handler,
 * after taking its idle error listener off, so the FATAL is emitted as 'error' before
 * the library's claim connection could add its listener; unhandled, that ended the
 * process (seen in the HTTP chaos runs: `server_crashes`). Here a TCP proxy on
 * loopback in front of the real Postgres appends that FATAL to the first
 * connection's ReadyForQuery: the request must fail retryably, the next one apply.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import net from 'node:net';
import pg from 'pg';
import { createIdempotency, migrateKeyTable } from 'effectively-once/http';
import { createTestDatabase, databaseUrl, type TestDatabase } from '../../helpers/db.js';

/** ReadyForQuery, idle: 'Z', length 5, 'I'. */
const READY = Buffer.from([0x5a, 0, 0, 0, 5, 0x49]);

/** An ErrorResponse FATAL 57P01, as Postgres sends when its backend is terminated. */
function fatal57P01(): Buffer {
  const fields = Buffer.concat(
    [
      ['S', 'FATAL'],
      ['V', 'FATAL'],
      ['C', '57P01'],
      ['M', 'terminating connection due to administrator command'],
    ]
      .map(([code, value]) => Buffer.from(`${code}${value}\0`, 'utf8'))
      .concat([Buffer.from([0])]),
  );
  const head = Buffer.alloc(5);
  head.write('E', 0);
  head.writeInt32BE(fields.length + 4, 1);
  return Buffer.concat([head, fields]);
}

/** Passes bytes through; the first connection's ReadyForQuery arrives with a FATAL behind it. */
async function startProxy(target: URL): Promise<{ port: number; close(): Promise<void> }> {
  let connections = 0;
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const doomed = connections++ === 0;
    const upstream = net.connect(Number(target.port), target.hostname);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('error', () => undefined);
      s.on('close', () => {
        client.destroy();
        upstream.destroy();
      });
    }
    client.on('data', (chunk) => upstream.write(chunk));
    let startup = true;
    upstream.on('data', (chunk: Buffer) => {
      const at = startup ? chunk.indexOf(READY) : -1;
      if (at === -1) return void client.write(chunk);
      startup = false;
      if (!doomed) return void client.write(chunk);
      // One write, one chunk: the client parses both messages in one go.
      client.end(Buffer.concat([chunk.subarray(0, at + READY.length), fatal57P01()]));
      upstream.destroy();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  return {
    port,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

describe('a backend terminated during its connection startup', () => {
  let db: TestDatabase;
  let proxy: Awaited<ReturnType<typeof startProxy>>;
  let pool: pg.Pool;

  beforeAll(async () => {
    db = await createTestDatabase('fatal_at_connect');
    await db.pool.query('CREATE TABLE charges (id bigserial PRIMARY KEY, key text NOT NULL)');
    await migrateKeyTable(db.pool, { schema: db.schema });
    const target = new URL(databaseUrl());
    proxy = await startProxy(target);
    const url = new URL(databaseUrl());
    url.hostname = '127.0.0.1';
    url.port = String(proxy.port);
    pool = new pg.Pool({
      connectionString: url.toString(),
      max: 2,
      options: `-c search_path=${db.schema}`,
    });
    // As an application does: errors of idle clients are the pool's.
    pool.on('error', () => undefined);
  });

  afterAll(async () => {
    await pool.end();
    await proxy.close();
    await db.close();
  });

  it('fails that request retryably instead of ending the process, and the retry applies once', async () => {
    const idempotency = createIdempotency({ pool, scope: 't', schema: db.schema, migrate: false });
    const charge = idempotency.handler(async (_request, ctx) => {
      await ctx.tx.query('INSERT INTO charges (key) VALUES ($1)', [ctx.key]);
      return Response.json({ ok: true }, { status: 201 });
    });
    const request = () =>
      new Request('http://localhost/charges', {
        method: 'POST',
        headers: { 'idempotency-key': 'k-1', 'content-type': 'application/json' },
        body: '{}',
      });
    try {
      const first = await charge(request());
      expect(first.status).toBe(503);
      const second = await charge(request());
      expect(second.status).toBe(201);
      const { rows } = await db.pool.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM charges WHERE key = 'k-1'`,
      );
      expect(rows[0]?.n).toBe(1);
    } finally {
      await idempotency.close({ timeoutMs: 1000 });
    }
  });
});
