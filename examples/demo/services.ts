import { randomBytes } from 'node:crypto';
import { startEmbeddedPostgres } from './embedded-postgres.js';
import { startEmbeddedSqs } from './embedded-sqs.js';

/** Where the demo's database and queue live, and how to tear down what it started. */
export interface DemoServices {
  databaseUrl: string;
  /** Schema for this run: fixed on the throwaway database, unique on a given one. */
  schema: string;
  /** True when the schema lives in a database the demo did not create (drop it at the end). */
  sharedDatabase: boolean;
  sqsEndpoint: string | undefined;
  description: string;
  stop(): Promise<void>;
}

/**
 * Embedded defaults: a Postgres from the `embedded-postgres` binaries and the fauxqs
 * SQS emulator in this process. `DATABASE_URL` / `SQS_ENDPOINT` replace either one.
 */
export async function startServices(): Promise<DemoServices> {
  const givenDb = process.env['DATABASE_URL'] || undefined;
  const givenSqs = process.env['SQS_ENDPOINT'] || undefined;
  const [postgres, sqs] = await Promise.all([
    givenDb ? undefined : startEmbeddedPostgres(),
    givenSqs ? undefined : startEmbeddedSqs(),
  ]);
  const db = postgres ? `embedded Postgres ${postgres.version}` : 'Postgres at DATABASE_URL';
  const queue = sqs ? 'in-process SQS emulator (fauxqs)' : `SQS at ${givenSqs}`;
  return {
    databaseUrl: givenDb ?? postgres?.url ?? '',
    schema: givenDb ? `eo_demo_${randomBytes(4).toString('hex')}` : 'payments',
    sharedDatabase: givenDb !== undefined,
    sqsEndpoint: givenSqs ?? sqs?.endpoint,
    description: `${db} + ${queue}`,
    stop: async () => {
      await Promise.allSettled([postgres?.stop(), sqs?.stop()]);
    },
  };
}
