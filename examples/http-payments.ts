/**
 * A payment API whose POST /charges is safe to retry: the charge row and the stored
 * response commit in one transaction, keyed by the caller's Idempotency-Key, scoped by
 * tenant. Fetch-style (web Request → Response), served here with Hono; the same
 * handler is a Next.js route handler (`export const POST = charges`) or a Deno/Bun one.
 *
 *   npm install effectively-once pg hono @hono/node-server
 *   DATABASE_URL=postgres://… PORT=3000 npx tsx examples/http-payments.ts
 *   curl -i -X POST localhost:3000/charges -H 'Idempotency-Key: k1' -H 'X-Tenant: acme' \
 *        -H 'Content-Type: application/json' -d '{"customerId":"cus_1","amountCents":1999}'
 */
import { pathToFileURL } from 'node:url';
import { serve } from '@hono/node-server';
import { Hono } from 'hono';
import pg from 'pg';
import { createIdempotency } from 'effectively-once/http';

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
  // An idle connection that Postgres closes (a restart, a terminated backend) is reported
  // here; without a listener that error would end the process.
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
    // Whose keys: a key from tenant A never replays tenant B's answer. In a real API,
    // the authenticated principal, not a header the caller chooses.
    scope: (request) => request.headers.get('x-tenant') ?? 'public',
  });

  const charges = idempotency.handler(async (request, { tx, scope }) => {
    const body = (await request.json()) as { customerId?: unknown; amountCents?: unknown };
    if (typeof body.customerId !== 'string' || !Number.isInteger(body.amountCents))
      // A 4xx is stored like any answer: the same request gets the same refusal.
      return Response.json({ error: 'customerId and amountCents are required' }, { status: 400 });
    const { rows } = await tx.query<{ id: string }>(
      'INSERT INTO charges (tenant, customer_id, amount_cents) VALUES ($1, $2, $3) RETURNING id',
      [scope, body.customerId, body.amountCents],
    );
    const charge = {
      id: `ch_${rows[0]?.id}`,
      customerId: body.customerId,
      amountCents: body.amountCents,
    };
    return Response.json(charge, { status: 201, headers: { location: `/charges/${charge.id}` } });
  });

  const app = new Hono();
  app.post('/charges', (c) => charges(c.req.raw));

  const server = serve({ fetch: app.fetch, port: Number(env.PORT ?? 3000), hostname: '127.0.0.1' });
  await new Promise<void>((resolve) => server.once('listening', resolve));
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
