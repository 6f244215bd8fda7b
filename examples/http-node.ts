/**
 * The payment API on plain node:http, no framework: the fetch-style endpoint served by
 * toNodeListener. The charge row and the stored response commit in one transaction,
 * keyed by the caller's Idempotency-Key, scoped by tenant; a retry gets the stored
 * answer with `Idempotent-Replayed: true`.
 *
 *   npm install effectively-once pg
 *   DATABASE_URL=postgres://… PORT=3000 npx tsx examples/http-node.ts
 */
import http from 'node:http';
import { pathToFileURL } from 'node:url';
import pg from 'pg';
import { createIdempotency, toNodeListener } from 'effectively-once/http';

export interface ServerOptions {
  /** Stop when this aborts. Run directly, SIGINT and SIGTERM abort it. */
  signal: AbortSignal;
  /** Where DATABASE_URL and PORT come from. Default `process.env`. */
  env?: NodeJS.ProcessEnv;
  /** Told the base URL once the server listens. */
  onListening?: (url: string) => void;
}

export async function main({
  signal,
  env = process.env,
  onListening,
}: ServerOptions): Promise<void> {
  const pool = new pg.Pool({ connectionString: required(env, 'DATABASE_URL') });
  pool.on('error', (err) => console.error('idle database connection lost:', err.message));
  await pool.query(`
    CREATE TABLE IF NOT EXISTS charges (
      id           bigserial PRIMARY KEY,
      tenant       text   NOT NULL,
      customer_id  text   NOT NULL,
      amount_cents bigint NOT NULL
    )`);
  const idempotency = createIdempotency({
    pool,
    scope: (request) => request.headers.get('x-tenant') ?? 'public',
  });

  const charges = idempotency.handler(async (request, { tx, scope }) => {
    const { customerId, amountCents } = (await request.json()) as {
      customerId: string;
      amountCents: number;
    };
    const { rows } = await tx.query<{ id: string }>(
      'INSERT INTO charges (tenant, customer_id, amount_cents) VALUES ($1, $2, $3) RETURNING id',
      [scope, customerId, amountCents],
    );
    const id = `ch_${rows[0]?.id}`;
    return Response.json(
      { id, customerId, amountCents },
      { status: 201, headers: { location: `/charges/${id}` } },
    );
  });

  // Routing is yours: anything but POST /charges is a 404 that claims nothing.
  const server = http.createServer(
    toNodeListener((request) =>
      request.method === 'POST' && new URL(request.url).pathname === '/charges'
        ? charges(request)
        : new Response('not found', { status: 404 }),
    ),
  );
  await new Promise<void>((resolve) =>
    server.listen(Number(env.PORT ?? 3000), '127.0.0.1', resolve),
  );
  const address = server.address();
  if (address !== null && typeof address === 'object')
    onListening?.(`http://127.0.0.1:${address.port}`);

  await aborted(signal);
  await new Promise<void>((resolve) => server.close(() => resolve()));
  await idempotency.close();
  await pool.end();
}

function required(env: NodeJS.ProcessEnv, name: string): string {
  const value = env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
}

function aborted(signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) resolve();
    else signal.addEventListener('abort', () => resolve(), { once: true });
  });
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const stop = new AbortController();
  process.once('SIGINT', () => stop.abort());
  process.once('SIGTERM', () => stop.abort());
  await main({ signal: stop.signal, onListening: (url) => console.log(`listening on ${url}`) });
}
