/**
 * A relay in a process of its own, publishing the outbox to an SQS FIFO queue and a
 * Kafka topic, with its events as metrics; and the operator's side: list parked rows,
 * requeue them once the cause is fixed. Run as many replicas as you like.
 *
 *   DATABASE_URL=postgres://… QUEUE_URL=…/invoices.fifo SQS_ENDPOINT=… KAFKA_BROKERS=… \
 *     npx tsx examples/outbox-relay.ts
 */
import { pathToFileURL } from 'node:url';
import { SQSClient } from '@aws-sdk/client-sqs';
import { Kafka } from 'kafkajs';
import pg from 'pg';
import { createRelay, listParked, migrateOutbox, requeueParked } from 'effectively-once/outbox';
import { kafkaPublisher } from 'effectively-once/kafka';
import { sqsPublisher } from 'effectively-once/sqs';

// #region relay
/** Runs a relay for the `invoices` (SQS) and `audit` (Kafka) destinations until `signal` aborts. */
export async function main({
  signal,
  env = process.env,
}: {
  signal: AbortSignal;
  env?: NodeJS.ProcessEnv;
}) {
  const pool = new pg.Pool({ connectionString: env.DATABASE_URL, max: 4 });
  await migrateOutbox(pool);
  const sqs = new SQSClient({ region: env.AWS_REGION ?? 'us-east-1', endpoint: env.SQS_ENDPOINT });
  const kafka = new Kafka({ brokers: (env.KAFKA_BROKERS ?? 'localhost:9092').split(',') });
  const audit = kafkaPublisher({ kafka, topic: env.KAFKA_TOPIC ?? 'audit' });
  const relay = createRelay({
    pool,
    publishers: {
      invoices: sqsPublisher({ client: sqs, queueUrl: env.QUEUE_URL ?? '' }),
      audit,
    },
    batchSize: 50,
    retention: { olderThanMs: 3 * 86_400_000 },
  });
  relay.on('batch', (b) =>
    console.log(`published ${b.published}/${b.claimed} in ${b.latencyMs.toFixed(1)} ms`),
  );
  relay.on('parked', (p) =>
    console.error(`parked ${p.id} (${p.destination}) after ${p.attempts} attempts`),
  );
  relay.on('lag', (s) =>
    console.log(`lag ${s.oldestPendingAgeMs} ms, ${s.pending} pending, ${s.parked} parked`),
  );
  await relay.start();
  await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve()));
  await relay.stop(); // finishes the batch in flight: nothing stays leased
  await audit.close();
  sqs.destroy();
  await pool.end();
}
// #endregion

// #region parked
/** Prints the parked `invoices` rows and puts them back in line. */
export async function requeueInvoices(pool: pg.Pool): Promise<number> {
  for (const row of await listParked(pool, { destination: 'invoices' }))
    console.log(`${row.id} key=${row.orderingKey} attempts=${row.attempts}: ${row.lastError}`);
  return requeueParked(pool, { destination: 'invoices' });
}
// #endregion

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const stop = new AbortController();
  process.once('SIGINT', () => stop.abort());
  process.once('SIGTERM', () => stop.abort());
  await main({ signal: stop.signal });
}
