/**
 * The steps bench's server, in a process of its own on `node:http` (the load generator
 * runs in the parent, the provider in a third process): the same work behind two
 * routes, each an Idempotency-Key endpoint of effectively-once/http served with
 * `toNodeListener`, so only the way the work is split differs:
 *
 * - `POST /steps`: a flow of three steps (`idempotency.steps`): DB step 'order' (one
 *   `orders` row), outside call 'charge' to the provider with the derived key, DB step
 *   'record' (the order's charge); each step its own transaction, the answer stored.
 * - `POST /tx`: one in-transaction handler (`idempotency.handler`): the same INSERT,
 *   the provider call and the UPDATE in the claim's transaction (held open across the
 *   call), the answer stored with the COMMIT.
 *
 * Env: BENCH_DATABASE_URL, BENCH_SCHEMA, BENCH_POOL, BENCH_PROVIDER_URL. Prints
 * `{"port":N,"library":url}` once listening.
 */
import { writeSync } from 'node:fs';
import http from 'node:http';
import pg from 'pg';
import { defineFlow } from 'effectively-once';
import { createIdempotency, toNodeListener } from 'effectively-once/http';
import { createCharge } from '../../kit/provider/client.js';

interface OrderBody {
  customerId: string;
  amountCents: number;
}

const schema = process.env['BENCH_SCHEMA'] ?? 'eo_bench_steps';
const providerUrl = process.env['BENCH_PROVIDER_URL'] ?? '';
const pool = new pg.Pool({
  connectionString: process.env['BENCH_DATABASE_URL'],
  max: Number(process.env['BENCH_POOL'] ?? 16),
  options: `-c search_path=${schema}`,
});
pool.on('error', () => undefined);
const INSERT = 'INSERT INTO orders (customer_id, amount_cents) VALUES ($1, $2) RETURNING id';
const RECORD = 'UPDATE orders SET charge_id = $1 WHERE id = $2';

/** One charge at the provider, `key` its Idempotency-Key; its id. */
async function charge(key: string, body: OrderBody): Promise<string> {
  const created = await createCharge(
    providerUrl,
    { amount: body.amountCents, customerId: body.customerId },
    { idempotencyKey: key },
  );
  return created.id;
}

const idempotency = createIdempotency({ pool, scope: 'bench', schema });

const flow = defineFlow('bench-order', async (input: OrderBody, run) => {
  const order = await run.step('order', async (tx) => {
    const { rows } = await tx.query<{ id: string }>(INSERT, [input.customerId, input.amountCents]);
    return { id: rows[0]?.id ?? '?' };
  });
  const charged = await run.call('charge', (key) => charge(key, input));
  await run.step('record', async (tx) => {
    await tx.query(RECORD, [charged, order.id]);
  });
  return { status: 201, body: { order: order.id, charge: charged } };
});
const steps = toNodeListener(idempotency.steps(flow));

const inTransaction = toNodeListener(
  idempotency.handler(async (request, ctx) => {
    const input = (await request.json()) as OrderBody;
    const { rows } = await ctx.tx.query<{ id: string }>(INSERT, [
      input.customerId,
      input.amountCents,
    ]);
    const order = rows[0]?.id ?? '?';
    const charged = await charge(`tx:${ctx.key}`, input);
    await ctx.tx.query(RECORD, [charged, order]);
    return Response.json({ order, charge: charged }, { status: 201 });
  }),
);

await idempotency.migrate();
const server = http.createServer((req, res) => {
  if (req.method === 'POST' && req.url === '/steps') return steps(req, res);
  if (req.method === 'POST' && req.url === '/tx') return inTransaction(req, res);
  res.statusCode = 404;
  res.end();
});
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
const address = server.address();
writeSync(
  1,
  `${JSON.stringify({
    port: typeof address === 'object' ? address?.port : null,
    library: import.meta.resolve('effectively-once/http'),
  })}\n`,
);

const stop = (): void => {
  server.closeAllConnections();
  server.close();
  void idempotency
    .close({ timeoutMs: 1000 })
    .then(() => pool.end())
    .then(() => process.exit(0));
};
process.once('SIGTERM', stop);
process.once('SIGINT', stop);
