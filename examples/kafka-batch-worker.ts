/**
 * A Kafka worker in batch mode: price changes per SKU must apply in order and once, fast.
 * Each partition is one ordered stream (`keyConcurrency` 1), so `pipeline` is what lets
 * a batch hold many records of one partition: up to `pipeline` consecutive records of a
 * partition are handed to the runner at once and claimed and applied in one transaction.
 * With `offsets: 'postgres'` each partition's next offset commits with the effects.
 *
 *   DATABASE_URL=postgres://… KAFKA_BROKERS=localhost:9092 KAFKA_TOPIC=prices \
 *   npx tsx examples/kafka-batch-worker.ts
 */
import { pathToFileURL } from 'node:url';
import { Kafka, logLevel } from 'kafkajs';
import pg from 'pg';
import { createConsumer } from 'effectively-once';
import { kafkaRecordOf, kafkaSource, migrateKafkaOffsets } from 'effectively-once/kafka';

/** The record value (JSON). */
export interface PriceChanged {
  sku: string;
  cents: number;
}

/** Runs the worker until `signal` aborts, then stops it cleanly. */
export async function main({
  signal,
  env = process.env,
}: {
  signal: AbortSignal;
  env?: NodeJS.ProcessEnv;
}): Promise<void> {
  const pool = new pg.Pool({ connectionString: env.DATABASE_URL });
  await pool.query(`
    CREATE TABLE IF NOT EXISTS price_changes (
      sku          text    NOT NULL,
      cents        integer NOT NULL,
      kafka_offset bigint  NOT NULL
    )`);
  await migrateKafkaOffsets(pool); // the table behind offsets: 'postgres'
  const kafka = new Kafka({
    clientId: 'prices-worker',
    brokers: (env.KAFKA_BROKERS ?? 'localhost:9092').split(','),
    logLevel: logLevel.WARN,
  });

  // #region consumer
  const consumer = createConsumer<PriceChanged>({
    name: 'prices',
    pool,
    concurrency: 4, // batches in their database part at once
    batch: { maxSize: 100, maxWaitMs: 20 },
    batchHandler: async (items, { tx }) => {
      // Only the records whose keys were newly claimed, in delivery order: one INSERT.
      await tx.query(
        `INSERT INTO price_changes (sku, cents, kafka_offset)
         SELECT * FROM unnest($1::text[], $2::integer[], $3::bigint[])`,
        [
          items.map((i) => i.message.sku),
          items.map((i) => i.message.cents),
          items.map((i) => kafkaRecordOf(i.delivery).offset),
        ],
      );
    },
    source: kafkaSource<PriceChanged>({
      kafka,
      groupId: env.KAFKA_GROUP ?? 'prices',
      topics: [env.KAFKA_TOPIC ?? 'prices'],
      fromBeginning: true,
      pipeline: 100, // about batch.maxSize: without it, one record per partition per batch
      offsets: 'postgres',
      pool,
      consumerConfig: {
        sessionTimeout: 30_000,
        heartbeatInterval: 3_000,
        // kafkajs heartbeats between fetches: keep this at most a third of sessionTimeout.
        maxWaitTimeInMs: 5_000,
      },
    }),
  });
  // #endregion
  consumer.on('error', (error) => console.error(`prices worker: ${error.message}`));

  await consumer.start();
  await new Promise<void>((resolve) => {
    if (signal.aborted) resolve();
    else signal.addEventListener('abort', () => resolve(), { once: true });
  });
  await consumer.stop({ timeoutMs: 30_000 });
  await pool.end();
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const stop = new AbortController();
  process.once('SIGINT', () => stop.abort());
  process.once('SIGTERM', () => stop.abort());
  await main({ signal: stop.signal });
}
