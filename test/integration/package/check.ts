// Type-checked by package.test.ts in a scratch project against the packed tarball's
// declarations (tsc, strict, NodeNext, skipLibCheck off): what a user's editor sees.
import { SQSClient } from '@aws-sdk/client-sqs';
import { Kafka, type EachMessagePayload } from 'kafkajs';
import pg from 'pg';
import {
  createConsumer,
  migrate,
  prune,
  EffectivelyOnceError,
  type Consumer,
  type ConsumerStats,
  type HandlerContext,
} from 'effectively-once';
import { sqsPublisher, sqsSource, withDedup } from 'effectively-once/sqs';
import { exactlyOnceEachMessage, kafkaPublisher, kafkaSource } from 'effectively-once/kafka';
import { createRelay, type Relay } from 'effectively-once/outbox';
import { memorySource } from 'effectively-once/testing';
import {
  idempotentFetch,
  RetriesExhaustedError,
  type IdempotentFetchOptions,
  type IdempotentFetchResult,
} from 'effectively-once/client';
import express from 'express';
import Fastify from 'fastify';
import {
  createIdempotency,
  webhookSources,
  type Idempotency,
  type IdempotencyContext,
  type IdempotencyOptions,
} from 'effectively-once/http';
import { expressWebhook, idempotentExpress } from 'effectively-once/http/express';
import { idempotencyPlugin } from 'effectively-once/http/fastify';
import { otelTelemetry, propagateTraceContext } from 'effectively-once/otel';
import { prismaLayer, type PrismaTransactionClient } from 'effectively-once/prisma';

interface Order {
  orderId: string;
}

const pool = new pg.Pool();

async function handler(order: Order, ctx: HandlerContext<Order>): Promise<void> {
  await ctx.tx.query('INSERT INTO orders (id) VALUES ($1)', [order.orderId]);
}

export const consumers: Consumer[] = [
  createConsumer<Order>({ name: 'memory', pool, source: memorySource<Order>(), handler }),
  createConsumer<Order>({
    name: 'traced',
    pool,
    source: memorySource<Order>(),
    handler,
    telemetry: otelTelemetry(),
  }),
  createConsumer<Order>({
    name: 'sqs',
    pool,
    source: sqsSource<Order>({
      client: new SQSClient({}),
      queueUrl: 'https://sqs.example/1/q',
      key: 'Idempotency-Key',
    }),
    handler,
    concurrency: 4,
    retention: { olderThanMs: 7 * 24 * 3600_000 },
  }),
  createConsumer<Order>({
    name: 'kafka',
    pool,
    source: kafkaSource<Order>({
      kafka: new Kafka({ brokers: ['localhost:9092'] }),
      groupId: 'g',
      topics: ['orders'],
    }),
    handler,
  }),
];

export const wrappedSqs = withDedup(
  async (message, { tx }) => {
    await tx.query('SELECT $1', [message.MessageId]);
  },
  { name: 'wrapped', pool },
);

export const wrappedKafka = exactlyOnceEachMessage<EachMessagePayload>(
  async ({ message }, { tx }) => {
    await tx.query('SELECT $1', [message.offset]);
  },
  { name: 'each', pool, producer: new Kafka({ brokers: ['localhost:9092'] }).producer() },
);

export async function housekeeping(): Promise<number> {
  await migrate(pool, { schema: 'public' });
  return prune(pool, { olderThan: 86_400_000 });
}

export const stats: ConsumerStats | undefined = consumers[0]?.stats();
export const isOurs = (error: unknown): boolean =>
  error instanceof EffectivelyOnceError && error.code.startsWith('EO_');

// @ts-expect-error: an unknown option is a type error
createConsumer<Order>({ name: 'x', pool, source: memorySource<Order>(), handler, concurency: 3 });

const clientOptions: IdempotentFetchOptions = { attempts: 3, deadlineMs: 30_000, json: { a: 1 } };
export async function charge(): Promise<IdempotentFetchResult | number> {
  try {
    return await idempotentFetch('https://api.example/charges', { method: 'POST' }, clientOptions);
  } catch (error) {
    if (error instanceof RetriesExhaustedError && error instanceof EffectivelyOnceError)
      return error.attempts;
    throw error;
  }
}

// @ts-expect-error: keyFormat is 'raw' or 'quoted'
void idempotentFetch('https://api.example/x', {}, { keyFormat: 'json' });

const endpointOptions: IdempotencyOptions = {
  pool,
  scope: (request) => request.headers.get('x-tenant') ?? 'anonymous',
  concurrent: 'wait',
  lockTimeoutMs: 2000,
};
export const idempotency: Idempotency = createIdempotency(endpointOptions);
export const fetchStyle: (request: Request) => Promise<Response> = idempotency.handler(
  async (request, ctx: IdempotencyContext) => {
    await ctx.tx.query('INSERT INTO charges (body) VALUES ($1)', [await request.text()]);
    return Response.json({ key: ctx.key }, { status: 201 });
  },
);
export const github = idempotency.webhook(
  { source: webhookSources.github, verify: () => true },
  async (_request, { tx, key }) => {
    await tx.query('INSERT INTO deliveries (id) VALUES ($1)', [key]);
  },
);

const app = express();
app.post(
  '/charges',
  idempotentExpress(idempotency, async (req, res, { tx }) => {
    await tx.query('SELECT $1', [JSON.stringify(req.body)]);
    res.status(201).json({ ok: true });
  }),
);
app.post(
  '/hooks/stripe',
  expressWebhook(
    idempotency,
    { source: webhookSources.stripe, verify: false },
    async (_req, res) => {
      res.sendStatus(204);
    },
  ),
);
// @ts-expect-error: verify is required (a function, or false to opt out explicitly)
idempotency.webhook({ source: webhookSources.github }, async () => undefined);

export async function fastifyApp(): Promise<void> {
  const server = Fastify();
  await server.register(idempotencyPlugin, { idempotency, methods: ['POST'] });
  server.post('/charges', { config: { idempotency: {} } }, async (request) => {
    const ctx = request.idempotency;
    if (ctx === null) throw new Error('not idempotent');
    await ctx.tx.query('SELECT 1');
    return { key: ctx.key };
  });
}

// @ts-expect-error: concurrent is 'wait' or 'reject'
createIdempotency({ pool, scope: 's', concurrent: 'queue' });
// @ts-expect-error: scope is required
createIdempotency({ pool });

export function traced(): Promise<IdempotentFetchResult> {
  return idempotentFetch(
    'https://api.example/charges',
    { method: 'POST' },
    { json: { amount: 1 }, propagate: propagateTraceContext },
  );
}

// The outbox's broker publishers come from the adapters' entry points; a kafkajs `Kafka`
// fits the structural type the Kafka publisher is written over.
export const relay: Relay = createRelay({
  pool,
  publishers: {
    invoices: sqsPublisher({ client: new SQSClient({}), queueUrl: 'https://sqs/q' }),
    audit: kafkaPublisher({ kafka: new Kafka({ brokers: ['localhost:9092'] }), topic: 'audit' }),
  },
});

// The Prisma entry's declarations type-check without @prisma/client installed: a client
// is anything with Prisma's interactive `$transaction`, and `ctx.tx` is what it hands over.
interface FakeTx {
  $queryRawUnsafe<T = unknown>(query: string, ...values: unknown[]): Promise<T>;
  $executeRawUnsafe(query: string, ...values: unknown[]): Promise<number>;
  order: { create(args: { data: { id: string } }): Promise<{ id: string }> };
}
declare const fakePrisma: {
  $transaction<R>(
    fn: (tx: FakeTx) => Promise<R>,
    options?: { maxWait?: number; timeout?: number },
  ): Promise<R>;
};
export const prismaBridge = prismaLayer(fakePrisma);
export const prismaTx = (tx: PrismaTransactionClient<typeof fakePrisma>) =>
  tx.order.create({ data: { id: 'o-1' } });
