import { randomBytes } from 'node:crypto';
import type { DemoBroker } from './broker.js';
import { startEmbeddedPostgres } from './embedded-postgres.js';
import { startEmbeddedSqs } from './embedded-sqs.js';

/** Where the demo's database lives, and how to tear down what the demo started. */
export interface DemoDatabase {
  url: string;
  /** Schema for this run: fixed on the throwaway database, unique on a given one. */
  schema: string;
  /** True when the database was given (DATABASE_URL): drop the schema at the end. */
  shared: boolean;
  description: string;
  stop(): Promise<void>;
}

/** Embedded default: Postgres from the `embedded-postgres` binaries; `DATABASE_URL` replaces it. */
export async function startDatabase(): Promise<DemoDatabase> {
  const given = process.env['DATABASE_URL'] || undefined;
  if (given) {
    return {
      url: given,
      schema: `eo_demo_${randomBytes(4).toString('hex')}`,
      shared: true,
      description: 'Postgres at DATABASE_URL',
      stop: async () => undefined,
    };
  }
  const postgres = await startEmbeddedPostgres();
  return {
    url: postgres.url,
    schema: 'payments',
    shared: false,
    description: `embedded Postgres ${postgres.version}`,
    stop: () => postgres.stop(),
  };
}

/**
 * KAFKA_BROKERS selects Kafka; otherwise SQS at SQS_ENDPOINT, or by default the fauxqs
 * SQS emulator running in this process.
 */
export async function startBroker(): Promise<DemoBroker> {
  const kafka = process.env['KAFKA_BROKERS'] || undefined;
  if (kafka) {
    const { startKafkaBroker } = await import('./broker-kafka.js');
    return startKafkaBroker(kafka);
  }
  const { startSqsBroker } = await import('./broker-sqs.js');
  const given = process.env['SQS_ENDPOINT'] || undefined;
  if (given) return startSqsBroker(given, `SQS at ${given}`);
  const sqs = await startEmbeddedSqs();
  const broker = await startSqsBroker(sqs.endpoint, 'in-process SQS emulator (fauxqs)');
  return {
    ...broker,
    close: async () => {
      await broker.close();
      await sqs.stop();
    },
  };
}
