/**
 * The HTTP bench's server, in a process of its own (the load generator runs in the
 * parent): one Fastify 5 app, one pg pool, the same effect (one `charges` row) behind
 * three routes:
 *
 * - `POST /plain`: (a) no idempotency: BEGIN, the INSERT, COMMIT.
 * - `POST /seed`: (b) the seed text's hand-written handler: BEGIN, claim the key with
 *   `INSERT ... ON CONFLICT DO NOTHING RETURNING`, the INSERT, store the response with
 *   an UPDATE, COMMIT; a key already there is rolled back and answered from a SELECT.
 * - `POST /eo`: (c, d) effectively-once/http's Fastify plugin: the claim, the INSERT
 *   through `ctx.tx`, the stored response and the COMMIT; a stored key is replayed.
 *
 * With BENCH_DATA_LAYER (`--data-layer`), `POST /eo` is the same route with the door's
 * `dataLayer` set to that layer (kit/data-layers/) and the INSERT written with the
 * layer's own raw call on `ctx.tx`; its keys are scoped `bench-<layer>`.
 *
 * Env: BENCH_DATABASE_URL, BENCH_SCHEMA, BENCH_POOL, BENCH_DATA_LAYER. Prints `{"port":N,"library":url}` once
 * listening (`library`: the module effectively-once/http resolved to).
 */
import { createHash } from 'node:crypto';
import { writeSync } from 'node:fs';
import Fastify from 'fastify';
import pg from 'pg';
import { createIdempotency } from 'effectively-once/http';
import { idempotencyContext, idempotencyPlugin } from 'effectively-once/http/fastify';
import { openDataLayer, type LayerName } from '../../kit/data-layers/index.js';

interface ChargeBody {
  customerId: string;
  amountCents: number;
}

const schema = process.env['BENCH_SCHEMA'] ?? 'eo_bench_http';
const pool = new pg.Pool({
  connectionString: process.env['BENCH_DATABASE_URL'],
  max: Number(process.env['BENCH_POOL'] ?? 16),
  options: `-c search_path=${schema}`,
});
pool.on('error', () => undefined);
const INSERT =
  'INSERT INTO charges (customer_id, amount_cents, idem_key) VALUES ($1, $2, $3) RETURNING id';

const app = Fastify();

// (a) The same INSERT in its own transaction, no key.
app.post<{ Body: ChargeBody }>(
  '/plain',
  { config: { idempotency: false } },
  async (request, reply) => {
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      const { rows } = await client.query<{ id: string }>(INSERT, [
        request.body.customerId,
        request.body.amountCents,
        null,
      ]);
      await client.query('COMMIT');
      return reply.code(201).send({ id: rows[0]?.id, ...request.body });
    } catch (error) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw error;
    } finally {
      client.release();
    }
  },
);

// (b) The seed's handler, as written there (Express there, Fastify here).
app.post<{ Body: ChargeBody }>(
  '/seed',
  { config: { idempotency: false } },
  async (request, reply) => {
    const key = request.headers['idempotency-key'];
    if (typeof key !== 'string') return reply.code(400).send({ error: 'Idempotency-Key required' });
    const hash = createHash('sha256').update(JSON.stringify(request.body)).digest('hex');
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      const claim = await client.query(
        `INSERT INTO seed_keys (key, request_hash) VALUES ($1, $2)
       ON CONFLICT (key) DO NOTHING RETURNING key`,
        [key, hash],
      );
      if (claim.rowCount === 0) {
        await client.query('ROLLBACK');
        const { rows } = await pool.query<{
          request_hash: string;
          status_code: number | null;
          response: unknown;
        }>('SELECT request_hash, status_code, response FROM seed_keys WHERE key = $1', [key]);
        const row = rows[0];
        if (row === undefined || row.request_hash !== hash)
          return reply.code(422).send({ error: 'key reused with different parameters' });
        if (row.status_code === null) return reply.code(409).send({ error: 'request in progress' });
        return reply.code(row.status_code).send(row.response);
      }
      const { rows } = await client.query<{ id: string }>(INSERT, [
        request.body.customerId,
        request.body.amountCents,
        key,
      ]);
      const charge = { id: rows[0]?.id, ...request.body };
      await client.query(
        'UPDATE seed_keys SET status_code = 201, response = $2::jsonb WHERE key = $1',
        [key, JSON.stringify(charge)],
      );
      await client.query('COMMIT');
      return reply.code(201).send(charge);
    } catch (error) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw error;
    } finally {
      client.release();
    }
  },
);

// A layer's statements name the table with its schema: its connections have no search_path.
const layerName = process.env['BENCH_DATA_LAYER'] as LayerName | undefined;
const data =
  layerName === undefined
    ? undefined
    : await openDataLayer(
        layerName,
        process.env['BENCH_DATABASE_URL'] ?? '',
        Number(process.env['BENCH_POOL'] ?? 16),
      );

// (c, d) The middleware: every POST route registered after the plugin.
const idempotency =
  data === undefined
    ? createIdempotency({ pool, scope: 'bench', schema })
    : createIdempotency({ pool, scope: `bench-${data.name}`, schema, dataLayer: data.layer });
await app.register(idempotencyPlugin, { idempotency });
if (data === undefined)
  app.post<{ Body: ChargeBody }>('/eo', async (request, reply) => {
    const ctx = request.idempotency;
    if (ctx === null) throw new Error('not idempotent');
    const { rows } = await ctx.tx.query<{ id: string }>(INSERT, [
      request.body.customerId,
      request.body.amountCents,
      ctx.key,
    ]);
    return reply.code(201).send({ id: rows[0]?.id, ...request.body });
  });
else {
  const insert = `INSERT INTO ${schema}.charges (customer_id, amount_cents, idem_key) VALUES ($1, $2, $3) RETURNING id::text AS id`;
  app.post<{ Body: ChargeBody }>('/eo', async (request, reply) => {
    const ctx = idempotencyContext(request, idempotency);
    const rows = await data.query(ctx.tx, insert, [
      request.body.customerId,
      request.body.amountCents,
      ctx.key,
    ]);
    return reply.code(201).send({ id: rows[0]?.['id'], ...request.body });
  });
}

await idempotency.migrate();
await app.listen({ port: 0, host: '127.0.0.1' });
const address = app.server.address();
writeSync(
  1,
  `${JSON.stringify({
    port: typeof address === 'object' ? address?.port : null,
    library: import.meta.resolve('effectively-once/http'),
  })}\n`,
);

const stop = (): void => {
  void app
    .close()
    .then(() => idempotency.close({ timeoutMs: 1000 }))
    .then(() => data?.close())
    .then(() => pool.end())
    .then(() => process.exit(0));
};
process.once('SIGTERM', stop);
process.once('SIGINT', stop);
