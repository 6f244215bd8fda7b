/**
 * Wrapping an existing kafkajs `eachMessage` worker. The app keeps its consumer, its
 * subscription and kafkajs's own offset handling; `exactlyOnceEachMessage` adds the
 * claim and hands the handler a transaction (`ctx.tx`). A record kafkajs delivers
 * again (after a crash before its offset commit, a rebalance, an offset reset) is
 * recognised as a duplicate.
 *
 *   DATABASE_URL=postgres://… KAFKA_BROKERS=localhost:9092 KAFKA_TOPIC=payments \
 *   npx tsx examples/wrap-kafkajs-each-message.ts
 */
import { pathToFileURL } from 'node:url';
import { Kafka, logLevel, type EachMessagePayload } from 'kafkajs';
import pg from 'pg';
import type { HandlerContext } from 'effectively-once';
import { exactlyOnceEachMessage } from 'effectively-once/kafka';

/** The record value (JSON). */
export interface PaymentCaptured {
  paymentId: string;
  accountId: string;
  amountCents: number;
}

// #region handler
/**
 * The app's handler as it was, plus `ctx`: instead of `pool.query(...)` it writes
 * through `ctx.tx`. Before wrapping it was `async ({ message }) => { ... }`.
 */
async function handlePayment(
  { message }: EachMessagePayload,
  { tx }: HandlerContext<EachMessagePayload>,
) {
  const payment = JSON.parse(message.value?.toString() ?? '') as PaymentCaptured;
  await tx.query(
    'INSERT INTO captured_payments (payment_id, account_id, amount_cents) VALUES ($1, $2, $3)',
    [payment.paymentId, payment.accountId, payment.amountCents],
  );
}
// #endregion

export interface WorkerOptions {
  /** Stop when this aborts. Run directly, SIGINT and SIGTERM abort it. */
  signal: AbortSignal;
  /** Where the endpoints come from. Default `process.env`. */
  env?: NodeJS.ProcessEnv;
}

/** Runs the kafkajs app until `signal` aborts, then stops both layers. */
export async function main({ signal, env = process.env }: WorkerOptions): Promise<void> {
  const pool = new pg.Pool({ connectionString: required(env, 'DATABASE_URL') });
  await pool.query(
    'CREATE TABLE IF NOT EXISTS captured_payments (payment_id text NOT NULL, account_id text NOT NULL, amount_cents integer NOT NULL)',
  );
  const kafka = new Kafka({
    clientId: 'payments-worker',
    brokers: required(env, 'KAFKA_BROKERS').split(','),
    logLevel: logLevel.WARN,
  });
  const consumer = kafka.consumer({ groupId: env.KAFKA_GROUP ?? 'payments' });
  const producer = kafka.producer(); // for dead letters (`<topic>.dlq`)
  await Promise.all([consumer.connect(), producer.connect()]);
  await consumer.subscribe({ topics: [env.KAFKA_TOPIC ?? 'payments'], fromBeginning: true });

  // #region wrap
  const exactlyOnce = exactlyOnceEachMessage<EachMessagePayload>(handlePayment, {
    name: 'payments',
    pool,
    producer,
    maxAttempts: 5,
  });
  exactlyOnce.consumer.on('duplicate', ({ key }) =>
    console.log(`payment ${key}: duplicate, skipped`),
  );
  await consumer.run({ eachMessage: exactlyOnce.eachMessage });
  // #endregion

  await new Promise<void>((resolve) => {
    if (signal.aborted) resolve();
    else signal.addEventListener('abort', () => resolve(), { once: true });
  });
  // #region shutdown
  await consumer.disconnect(); // first kafkajs (it waits for the running eachMessage)...
  await exactlyOnce.stop(); // ...then the exactly-once consumer behind it
  // #endregion
  await producer.disconnect();
  await pool.end();
}

function required(env: NodeJS.ProcessEnv, name: string): string {
  const value = env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const stop = new AbortController();
  process.once('SIGINT', () => stop.abort());
  process.once('SIGTERM', () => stop.abort());
  await main({ signal: stop.signal });
}
