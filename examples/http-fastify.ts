/**
 * The payment API on Fastify 5: register idempotencyPlugin, then every POST and PATCH
 * route runs inside its key's transaction (`request.idempotency.tx`) and what it
 * returns is stored with the effect, committed, then sent.
 *
 *   DATABASE_URL=postgres://… PORT=3000 npx tsx examples/http-fastify.ts
 */
import { pathToFileURL } from 'node:url';
import Fastify from 'fastify';
import pg from 'pg';
import { createIdempotency } from 'effectively-once/http';
import { idempotencyPlugin } from 'effectively-once/http/fastify';

export interface ServerOptions {
  /** Stop when this aborts. Run directly, SIGINT and SIGTERM abort it. */
  signal: AbortSignal;
  /** Where DATABASE_URL and PORT come from. Default `process.env`. */
  env?: NodeJS.ProcessEnv;
  /** Told the base URL once the server listens. */
  onListening?: (url: string) => void;
}

interface ChargeBody {
  customerId: string;
  amountCents: number;
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

  const app = Fastify();
  // Awaited, before the routes: the plugin wraps the routes registered after it.
  await app.register(idempotencyPlugin, {
    idempotency,
    scope: (request) => String(request.headers['x-tenant'] ?? 'public'),
  });
  app.post<{ Body: ChargeBody }>(
    '/charges',
    {
      schema: {
        body: {
          type: 'object',
          required: ['customerId', 'amountCents'],
          properties: { customerId: { type: 'string' }, amountCents: { type: 'integer' } },
        },
      },
    },
    async (request, reply) => {
      const { tx, scope } = request.idempotency!;
      const { customerId, amountCents } = request.body;
      const { rows } = await tx.query<{ id: string }>(
        'INSERT INTO charges (tenant, customer_id, amount_cents) VALUES ($1, $2, $3) RETURNING id',
        [scope, customerId, amountCents],
      );
      const id = `ch_${rows[0]?.id}`;
      return reply
        .code(201)
        .header('location', `/charges/${id}`)
        .send({ id, customerId, amountCents });
    },
  );

  await app.listen({ port: Number(env.PORT ?? 3000), host: '127.0.0.1' });
  const address = app.server.address();
  if (address !== null && typeof address === 'object')
    onListening?.(`http://127.0.0.1:${address.port}`);

  await aborted(signal);
  await app.close();
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
