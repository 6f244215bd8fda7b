// Run by package.test.ts inside a scratch project that installed the packed tarball:
// plain Node, no TypeScript loader, no path mapping. Exits non-zero on any failure.
/* global process, console, setTimeout, Request, Response */
import * as core from 'effectively-once';
import * as sqs from 'effectively-once/sqs';
import * as kafka from 'effectively-once/kafka';
import * as kafkaPlatformatic from 'effectively-once/kafka/platformatic';
import * as testing from 'effectively-once/testing';
import * as client from 'effectively-once/client';
import * as httpCore from 'effectively-once/http';
import * as httpExpress from 'effectively-once/http/express';
import * as httpFastify from 'effectively-once/http/fastify';
import * as otel from 'effectively-once/otel';
import * as outbox from 'effectively-once/outbox';
import * as typeorm from 'effectively-once/typeorm';
import * as kysely from 'effectively-once/kysely';
import * as rabbitmq from 'effectively-once/rabbitmq';
// No @prisma/client in the scratch project: the entry loads without it.
import * as prisma from 'effectively-once/prisma';
import * as drizzle from 'effectively-once/drizzle';
import * as postgresJs from 'effectively-once/postgres-js';
import * as knex from 'effectively-once/knex';
// Neither @middy/core nor @types/aws-lambda is needed at run time.
import * as lambda from 'effectively-once/lambda';
import * as nestjs from 'effectively-once/nestjs';
import http from 'node:http';
import { createRequire } from 'node:module';
import pg from 'pg';

const failures = [];
const check = (ok, what) => ok || failures.push(what);

for (const [name, value] of Object.entries({
  createConsumer: core.createConsumer,
  migrate: core.migrate,
  prune: core.prune,
  EffectivelyOnceError: core.EffectivelyOnceError,
  'sqs.sqsSource': sqs.sqsSource,
  'sqs.withDedup': sqs.withDedup,
  'sqs.sqsPublisher': sqs.sqsPublisher,
  'kafka.kafkaSource': kafka.kafkaSource,
  'kafka.exactlyOnceEachMessage': kafka.exactlyOnceEachMessage,
  'kafka.kafkaPublisher': kafka.kafkaPublisher,
  'kafka/platformatic.platformaticClients': kafkaPlatformatic.platformaticClients,
  'testing.memorySource': testing.memorySource,
  'client.idempotentFetch': client.idempotentFetch,
  'client.RetriesExhaustedError': client.RetriesExhaustedError,
  'http.createIdempotency': httpCore.createIdempotency,
  'http.pruneIdempotencyKeys': httpCore.pruneIdempotencyKeys,
  'http.IdempotencyKeyReusedError': httpCore.IdempotencyKeyReusedError,
  'http/express.idempotentExpress': httpExpress.idempotentExpress,
  'http/express.expressWebhook': httpExpress.expressWebhook,
  'http/fastify.idempotencyPlugin': httpFastify.idempotencyPlugin,
  'outbox.enqueue': outbox.enqueue,
  'outbox.createRelay': outbox.createRelay,
  'outbox.httpPublisher': outbox.httpPublisher,
  'otel.otelTelemetry': otel.otelTelemetry,
  'otel.propagateTraceContext': otel.propagateTraceContext,
  // Loads without typeorm installed: the entry imports its types only.
  'typeorm.typeormLayer': typeorm.typeormLayer,
  'kysely.kyselyLayer': kysely.kyselyLayer,
  'rabbitmq.rabbitmqSource': rabbitmq.rabbitmqSource,
  'rabbitmq.rabbitmqPublisher': rabbitmq.rabbitmqPublisher,
  'prisma.prismaLayer': prisma.prismaLayer,
  'drizzle.drizzleLayer': drizzle.drizzleLayer,
  'postgresJs.postgresLayer': postgresJs.postgresLayer,
  // knex is not installed here either.
  'knex.knexLayer': knex.knexLayer,
  'lambda.lambdaConsumer': lambda.lambdaConsumer,
  'nestjs.EffectivelyOnceModule': nestjs.EffectivelyOnceModule,
  'nestjs.Idempotent': nestjs.Idempotent,
})) {
  check(typeof value === 'function', `${name} is exported as a function (got ${typeof value})`);
}

// Only the entry points of the exports map (and package.json) are public.
try {
  await import('effectively-once/dist/src/consumer/runner.js');
  check(false, 'a deep import must be refused by the exports map');
} catch (error) {
  check(error?.code === 'ERR_PACKAGE_PATH_NOT_EXPORTED', `deep import refused: ${error?.code}`);
}
check(
  createRequire(import.meta.url)('effectively-once/package.json').name === 'effectively-once',
  'package.json export',
);
// The built code works end to end: a memory source, a real Postgres, duplicates skipped.
const schema = `pkg_smoke_${process.pid}`;
const pool = new pg.Pool({
  connectionString: process.env.DATABASE_URL,
  options: `-c search_path=${schema}`,
});
try {
  await pool.query(`CREATE SCHEMA ${schema}`);
  await pool.query('CREATE TABLE effects (k text NOT NULL)');
  const source = testing.memorySource();
  const consumer = core.createConsumer({
    name: 'package-smoke',
    schema,
    pool,
    source,
    // The built otel entry against @opentelemetry/api's no-op providers: observes, changes nothing.
    telemetry: otel.otelTelemetry(),
    handler: async (message, { tx }) => {
      await tx.query('INSERT INTO effects (k) VALUES ($1)', [message.k]);
    },
  });
  await consumer.start();
  source.send({ k: 'a' }, { key: 'a' });
  source.send({ k: 'a' }, { key: 'a' });
  source.send({ k: 'b' }, { key: 'b' });
  const deadline = Date.now() + 10_000;
  while (source.outstanding > 0 && Date.now() < deadline)
    await new Promise((r) => setTimeout(r, 20));
  await consumer.stop();
  const { rows } = await pool.query('SELECT k FROM effects ORDER BY k');
  check(
    rows.map((r) => r.k).join(',') === 'a,b',
    `effects once each: got ${rows.map((r) => r.k).join(',')}`,
  );
  check(consumer.stats().duplicates === 1, `one duplicate: got ${consumer.stats().duplicates}`);
} finally {
  await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`).catch(() => undefined);
  await pool.end();
}

// One class per error across entry points: a client error is the core's EffectivelyOnceError.
check(
  new client.UnreplayableBodyError('x') instanceof core.EffectivelyOnceError,
  'client errors extend the core EffectivelyOnceError',
);
// The built client end to end: a 503 (rolled back), then the retry applies, same key.
const seen = [];
const server = http.createServer((req, res) => {
  seen.push(req.headers['idempotency-key']);
  res.writeHead(seen.length === 1 ? 503 : 201).end();
});
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
try {
  const result = await client.idempotentFetch(
    `http://127.0.0.1:${server.address().port}/charges`,
    { method: 'POST' },
    { json: { amount: 1 }, backoff: { initialMs: 1, maxMs: 10 } },
  );
  check(result.response.status === 201, `client: final status 201 (got ${result.response.status})`);
  check(result.attempts === 2, `client: two attempts (got ${result.attempts})`);
  check(seen.length === 2 && seen[0] === seen[1], `client: one key on both attempts: ${seen}`);
} finally {
  server.closeAllConnections();
  server.close();
}

// The built http core end to end on Postgres: the effect once, the second answer a replay.
const httpSchema = `pkg_http_${process.pid}`;
const httpPool = new pg.Pool({
  connectionString: process.env.DATABASE_URL,
  options: `-c search_path=${httpSchema}`,
});
try {
  await httpPool.query(`CREATE SCHEMA ${httpSchema}`);
  await httpPool.query('CREATE TABLE charges (k text NOT NULL)');
  const idempotency = httpCore.createIdempotency({
    pool: httpPool,
    scope: 'smoke',
    schema: httpSchema,
    retention: false,
  });
  const charge = idempotency.handler(async (request, { tx, key }) => {
    await tx.query('INSERT INTO charges (k) VALUES ($1)', [key]);
    return Response.json(await request.json(), { status: 201 });
  });
  const send = () =>
    charge(
      new Request('http://localhost/charges', {
        method: 'POST',
        headers: { 'idempotency-key': 'smoke-1', 'content-type': 'application/json' },
        body: '{"amount":1}',
      }),
    );
  const first = await send();
  const second = await send();
  check(first.status === 201, `http: first 201 (got ${first.status})`);
  check(
    second.headers.get('idempotent-replayed') === 'true',
    'http: the second answer is a replay',
  );
  check((await second.text()) === '{"amount":1}', 'http: the replay has the stored body');
  const { rows } = await httpPool.query('SELECT count(*)::int AS n FROM charges');
  check(rows[0].n === 1, `http: one effect (got ${rows[0].n})`);
  await idempotency.close();
} finally {
  await httpPool.query(`DROP SCHEMA IF EXISTS ${httpSchema} CASCADE`).catch(() => undefined);
  await httpPool.end();
}

if (failures.length > 0) {
  console.error(`package smoke test failed:\n- ${failures.join('\n- ')}`);
  process.exit(1);
}
console.log('package smoke test: ok');
