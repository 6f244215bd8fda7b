/**
 * The payment API on Express 5: an ordinary (req, res) handler, made idempotent by
 * idempotentExpress. What it writes to `res` is held back, stored with the charge in
 * one transaction, committed, then sent; a retry gets it again with
 * `Idempotent-Replayed: true`.
 *
 *   DATABASE_URL=postgres://… PORT=3000 npx tsx examples/http-express.ts
 */
import http from 'node:http';
import { pathToFileURL } from 'node:url';
import express from 'express';
import pg from 'pg';
import { createIdempotency } from 'effectively-once/http';
import { idempotentExpress } from 'effectively-once/http/express';

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
  await pool.query(`
    CREATE TABLE IF NOT EXISTS charges (
      id           bigserial PRIMARY KEY,
      tenant       text   NOT NULL,
      customer_id  text   NOT NULL,
      amount_cents bigint NOT NULL
    )`);
  const idempotency = createIdempotency({ pool, scope: 'public' });

  const app = express();
  app.post(
    '/charges',
    // No express.json() before it: the adapter fingerprints the raw bytes and fills
    // req.body itself. The scope comes from the Express request (your auth middleware's).
    idempotentExpress(
      idempotency,
      async (req, res, { tx, scope }) => {
        const { customerId, amountCents } = req.body as { customerId: string; amountCents: number };
        const { rows } = await tx.query<{ id: string }>(
          'INSERT INTO charges (tenant, customer_id, amount_cents) VALUES ($1, $2, $3) RETURNING id',
          [scope, customerId, amountCents],
        );
        const id = `ch_${rows[0]?.id}`;
        res.status(201).location(`/charges/${id}`).json({ id, customerId, amountCents });
      },
      { scope: (req) => req.get('x-tenant') ?? 'public' },
    ),
  );

  const server = http.createServer(app);
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
