/**
 * `tsx bench/http/inproc.ts [requests] [rounds]`: the HTTP middleware's CPU per request in
 * this process, without sockets or a load generator. Same effect (one `charges` row) as
 * bench/http/server.ts; for each mode, this process's user+system CPU per request and the
 * rate, with 8 requests in flight:
 *   plain      BEGIN, INSERT, COMMIT on a pool client (no idempotency);
 *   web        idempotency.handle() on a web Request (first executions);
 *   web-replay idempotency.handle() on keys already stored;
 *   fy-plain   the same plain route in Fastify, through app.inject();
 *   fy-eo      the Fastify plugin's route, through app.inject() (first executions);
 *   fy-replay  the Fastify plugin's route on keys already stored.
 * Uses DATABASE_URL, or starts Postgres like the bench does.
 */
import { randomUUID } from 'node:crypto';
import Fastify from 'fastify';
import pg from 'pg';
import { createIdempotency } from 'effectively-once/http';
import { idempotencyPlugin } from 'effectively-once/http/fastify';
import { ensureServices } from '../services.js';

const SCHEMA = 'eo_bench_inproc';
const BODY = JSON.stringify({ customerId: 'cus_42', amountCents: 1999 });
const INSERT =
  'INSERT INTO charges (customer_id, amount_cents, idem_key) VALUES ($1, $2, $3) RETURNING id';
const requests = Number(process.argv[2] ?? 2000);
const rounds = Number(process.argv[3] ?? 2);
const inFlight = 8;

const services = await ensureServices(null);
const admin = new pg.Client({ connectionString: services.endpoints.databaseUrl });
await admin.connect();
await admin.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
await admin.query(`CREATE SCHEMA ${SCHEMA}`);
await admin.query(`CREATE TABLE ${SCHEMA}.charges (
  id bigserial PRIMARY KEY, customer_id text NOT NULL, amount_cents bigint NOT NULL,
  idem_key text, created_at timestamptz NOT NULL DEFAULT now())`);
await admin.end();

const pool = new pg.Pool({
  connectionString: services.endpoints.databaseUrl,
  max: inFlight,
  options: `-c search_path=${SCHEMA}`,
});
const idempotency = createIdempotency({ pool, scope: 'bench', schema: SCHEMA });
await idempotency.migrate();

interface ChargeBody {
  customerId: string;
  amountCents: number;
}

const app = Fastify();
app.post<{ Body: ChargeBody }>('/plain', { config: { idempotency: false } }, async (req, reply) => {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    const { rows } = await client.query<{ id: string }>(INSERT, [
      req.body.customerId,
      req.body.amountCents,
      null,
    ]);
    await client.query('COMMIT');
    return reply.code(201).send({ id: rows[0]?.id, ...req.body });
  } finally {
    client.release();
  }
});
await app.register(idempotencyPlugin, { idempotency });
app.post<{ Body: ChargeBody }>('/eo', async (req, reply) => {
  const ctx = req.idempotency!;
  const { rows } = await ctx.tx.query<{ id: string }>(INSERT, [
    req.body.customerId,
    req.body.amountCents,
    ctx.key,
  ]);
  return reply.code(201).send({ id: rows[0]?.id, ...req.body });
});
await app.ready();

const webEndpoint = idempotency.handler(async (request, ctx) => {
  const body = (await request.json()) as ChargeBody;
  const { rows } = await ctx.tx.query<{ id: string }>(INSERT, [
    body.customerId,
    body.amountCents,
    ctx.key,
  ]);
  return Response.json({ id: rows[0]?.id, ...body }, { status: 201 });
});

async function plain(): Promise<void> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    const { rows } = await client.query<{ id: string }>(INSERT, ['cus_42', 1999, null]);
    await client.query('COMMIT');
    const response = Response.json({ id: rows[0]?.id }, { status: 201 });
    await response.arrayBuffer();
  } finally {
    client.release();
  }
}

async function web(key: string): Promise<void> {
  const response = await webEndpoint(
    new Request('http://localhost/charges', {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': key },
      body: BODY,
    }),
  );
  if (response.status !== 201) throw new Error(`web: ${response.status}`);
  await response.arrayBuffer();
}

async function inject(path: string, key: string | undefined): Promise<void> {
  const response = await app.inject({
    method: 'POST',
    url: path,
    headers: {
      'content-type': 'application/json',
      ...(key !== undefined ? { 'idempotency-key': key } : {}),
    },
    payload: BODY,
  });
  if (response.statusCode !== 201)
    throw new Error(`${path}: ${response.statusCode} ${response.body}`);
}

const webStored = Array.from({ length: 200 }, () => randomUUID());
const fyStored = Array.from({ length: 200 }, () => randomUUID());
for (const key of webStored) await web(key);
for (const key of fyStored) await inject('/eo', key);

const modes: Record<string, (i: number) => Promise<void>> = {
  plain: () => plain(),
  web: () => web(randomUUID()),
  'web-replay': (i) => web(webStored[i % webStored.length]!),
  'fy-plain': () => inject('/plain', undefined),
  'fy-eo': () => inject('/eo', randomUUID()),
  'fy-replay': (i) => inject('/eo', fyStored[i % fyStored.length]),
};

async function measure(run: (i: number) => Promise<void>, n: number) {
  let next = 0;
  const cpu = process.cpuUsage();
  const start = performance.now();
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (next < n) await run(next++);
    }),
  );
  const ms = performance.now() - start;
  const used = process.cpuUsage(cpu);
  return {
    usPerReq: (used.user + used.system) / n,
    sysPerReq: used.system / n,
    rps: (n * 1000) / ms,
  };
}

const only = process.env['MODES']?.split(',');
if (only !== undefined)
  for (const name of Object.keys(modes)) if (!only.includes(name)) delete modes[name];
for (const run of Object.values(modes)) await measure(run, 300); // warm-up
const results: Record<string, { us: number[]; sys: number[]; rps: number[] }> = {};
for (let r = 0; r < rounds; r++)
  for (const [name, run] of Object.entries(modes)) {
    const m = await measure(run, requests);
    (results[name] ??= { us: [], sys: [], rps: [] }).us.push(m.usPerReq);
    results[name].sys.push(m.sysPerReq);
    results[name].rps.push(m.rps);
  }
const best = (xs: number[]) => Math.min(...xs);
const plainUs = best(results['plain']?.us ?? [NaN]);
const fyPlainUs = best(results['fy-plain']?.us ?? [NaN]);
for (const [name, { us, sys, rps }] of Object.entries(results)) {
  const base = name.startsWith('fy-') ? fyPlainUs : plainUs;
  console.log(
    `${name.padEnd(11)} ${best(us).toFixed(0).padStart(5)} µs/req CPU (×${(best(us) / base).toFixed(2)}; system ${best(sys).toFixed(0)})  ${Math.max(
      ...rps,
    )
      .toFixed(0)
      .padStart(5)} req/s`,
  );
}
await app.close();
await idempotency.close({ timeoutMs: 1000 });
await pool.end();
await services.stop();
