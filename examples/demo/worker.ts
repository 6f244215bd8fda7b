import pg from 'pg';
import { createConsumer, type Consumer, type Source } from 'effectively-once';
import { workerSource, type BrokerEnv } from './broker.js';
import { chargeHandler, type Charge } from './payments.js';

/** Where a payment worker finds its database and broker. */
export interface WorkerConfig {
  /** Worker instance name, written next to each charge it books. */
  worker: string;
  databaseUrl: string;
  /** Schema holding the payment tables and the dedup table. */
  schema: string;
  broker: BrokerEnv;
  /** Deliveries handled at once. */
  concurrency: number;
  /** Called for every delivery the broker hands to this worker. */
  onDelivery?: () => void;
}

/** A started payment worker. */
export interface PaymentWorker {
  consumer: Consumer;
  /** Stops the consumer (finishing in-flight charges), then closes its pool. Idempotent. */
  close(): Promise<void>;
}

/**
 * One payment worker instance: `createConsumer` + the broker's source. Every instance
 * uses the same consumer `name`, so they share one dedup namespace, like the replicas
 * of one deployment.
 */
export async function startPaymentWorker(config: WorkerConfig): Promise<PaymentWorker> {
  const pool = new pg.Pool({
    connectionString: config.databaseUrl,
    max: config.concurrency + 2,
    options: `-c search_path=${config.schema}`,
  });
  pool.on('error', () => undefined); // idle clients of a stopped server; nothing to do
  const broker = await workerSource(config.broker, config.worker);
  const consumer = createConsumer<Charge>({
    name: 'payments',
    schema: config.schema,
    pool,
    concurrency: config.concurrency,
    source: config.onDelivery ? counting(broker.source, config.onDelivery) : broker.source,
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
        broker.close();
        await pool.end();
      })()),
  };
}

/** The same source, counting each delivery it hands to the runner. */
function counting<T>(source: Source<T>, onDelivery: () => void): Source<T> {
  return {
    description: source.description,
    run: (ctx) =>
      source.run({
        ...ctx,
        deliver: (delivery) => {
          onDelivery();
          return ctx.deliver(delivery);
        },
      }),
    close: () => source.close(),
  };
}
