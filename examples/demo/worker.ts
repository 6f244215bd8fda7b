import pg from 'pg';
import { createConsumer, type Consumer } from 'effectively-once';
import { sqsSource } from 'effectively-once/sqs';
import { chargeHandler, IDEMPOTENCY_KEY, type Charge } from './payments.js';
import { countReceives, sqsClient } from './sqs.js';

/** Where a payment worker finds its database and queue. */
export interface WorkerConfig {
  /** Worker instance name, written next to each charge it books. */
  worker: string;
  databaseUrl: string;
  /** Schema holding the payment tables and the dedup table. */
  schema: string;
  sqsEndpoint: string | undefined;
  queueUrl: string;
  /** Deliveries handled at once. */
  concurrency: number;
  /** Called with the size of every ReceiveMessage result. */
  onReceive?: (messages: number) => void;
}

/** A started payment worker. */
export interface PaymentWorker {
  consumer: Consumer;
  /** Stops the consumer (finishing in-flight charges), then closes its pool and client. Idempotent. */
  close(): Promise<void>;
}

/**
 * One payment worker instance: `createConsumer` + `sqsSource`. Every instance uses the
 * same consumer `name`, so they share one dedup namespace, like the replicas of one
 * deployment.
 */
export async function startPaymentWorker(config: WorkerConfig): Promise<PaymentWorker> {
  const pool = new pg.Pool({
    connectionString: config.databaseUrl,
    max: config.concurrency + 2,
    options: `-c search_path=${config.schema}`,
  });
  pool.on('error', () => undefined); // idle clients of a stopped server; nothing to do
  const client = sqsClient(config.sqsEndpoint);
  if (config.onReceive) countReceives(client, config.onReceive);
  const consumer = createConsumer<Charge>({
    name: 'payments',
    schema: config.schema,
    pool,
    concurrency: config.concurrency,
    source: sqsSource<Charge>({
      client,
      queueUrl: config.queueUrl,
      keyAttribute: IDEMPOTENCY_KEY,
      waitTimeSeconds: 1,
      // Off on purpose: a slow handler then outlives the visibility timeout and SQS
      // delivers its message again while it runs. Keep it on in production.
      heartbeat: false,
    }),
    handler: chargeHandler(config.worker),
    backoff: { initialMs: 200, maxMs: 2_000 },
    busyRetryDelayMs: 500,
    // The demo migrates once before any worker starts, as a deploy step would.
    migrate: false,
  });
  await consumer.start();
  let closing: Promise<void> | undefined;
  return {
    consumer,
    close: () =>
      (closing ??= (async () => {
        await consumer.stop({ timeoutMs: 10_000 });
        client.destroy();
        await pool.end();
      })()),
  };
}
