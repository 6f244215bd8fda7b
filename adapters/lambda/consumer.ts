import type { Context, SQSBatchResponse, SQSEvent } from 'aws-lambda';
import type { PoolClient } from 'pg';
import { createConsumer } from '../../src/consumer/consumer.js';
import { PushSource } from '../../src/consumer/push-source.js';
import type { Consumer } from '../../src/consumer/types.js';
import { ConfigurationError } from '../../src/errors.js';
import type { DeliveryOutcome } from '../../src/types.js';
import type { SQSRecord } from 'aws-lambda';
import { batchItemFailures } from './answer.js';
import { lambdaSettings, type LambdaConsumerOptions, type LambdaSettings } from './options.js';
import { RecordDelivery } from './record.js';

/**
 * An SQS handler for AWS Lambda, to export as the function's handler: Lambda calls it
 * with each batch its event source mapping received, it answers which records to keep.
 */
export interface LambdaConsumer {
  /**
   * Runs every record of `event` (claim, handler, COMMIT) and answers the records not
   * finished in `batchItemFailures` (the mapping needs `ReportBatchItemFailures`).
   * Rejects only when the consumer cannot start (the dedup table's migration failed):
   * Lambda then returns the whole batch.
   */
  (event: SQSEvent, context: Context): Promise<SQSBatchResponse>;
  /** The consumer behind it: events (`processed`, `duplicate`, `failed`...) and `stats()`. */
  readonly consumer: Consumer;
  /**
   * Migrates the dedup table (unless `migrate: false`) and starts the consumer; the first
   * event does it when you do not. Call it at module scope to do it during the init phase.
   */
  start(): Promise<void>;
}

/**
 * Creates a Lambda SQS handler with an exactly-once effect: each record's key is claimed
 * in the transaction the handler writes with (`ctx.tx`), and the answer lists only the
 * records whose effect did not commit, so Lambda deletes the rest. Records of one FIFO
 * message group run in order and stop at the group's first failure.
 *
 * Create it at module scope, beside the pool, so both live across invocations; never end
 * the pool in the handler.
 *
 * ```ts
 * const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: 2 });
 * export const handler = lambdaConsumer({
 *   name: 'orders', pool, concurrency: 1,
 *   handler: async (record, { tx }) => {
 *     await tx.query('INSERT INTO orders (body) VALUES ($1)', [record.body]);
 *   },
 * });
 * ```
 */
export function lambdaConsumer<Tx = PoolClient>(
  options: LambdaConsumerOptions<Tx>,
): LambdaConsumer {
  const settings = lambdaSettings(options as LambdaConsumerOptions<unknown>);
  const runner = new LambdaRunner(settings, options);
  const handler = (event: SQSEvent, context: Context): Promise<SQSBatchResponse> =>
    runner.run(event, context);
  return Object.assign(handler, {
    consumer: runner.consumer,
    start: () => runner.start(),
  });
}

/** The invocation side of a {@link LambdaConsumer}: one consumer, fed each event's records. */
export class LambdaRunner<Tx> {
  readonly consumer: Consumer;
  private readonly source = new PushSource<SQSRecord>('lambda:sqs');
  private starting: Promise<void> | undefined;

  constructor(
    private readonly settings: LambdaSettings,
    options: LambdaConsumerOptions<Tx>,
  ) {
    const { key: _k, deduplicationScope: _s, deadlineMarginMs: _m, ...consumerOptions } = options;
    this.consumer = createConsumer<SQSRecord, Tx>({ ...consumerOptions, source: this.source });
  }

  start(): Promise<void> {
    // A failed start (Postgres down during the migration) is not kept: the next event tries again.
    this.starting ??= this.consumer.start().catch((error: unknown) => {
      this.starting = undefined;
      throw error;
    });
    return this.starting;
  }

  async run(event: SQSEvent, context: Context): Promise<SQSBatchResponse> {
    const records = recordsOf(event);
    await this.start();
    const workDeadline = this.workDeadline(context);
    const deliveries = records.map(
      (record) => new RecordDelivery(record, this.settings, workDeadline),
    );
    // All pushed at once, in the event's order: the consumer bounds the concurrency and
    // runs each FIFO group in order, holding back what follows a record that went back.
    const outcomes = await Promise.all(
      deliveries.map((delivery) =>
        this.source.push(delivery).catch((): DeliveryOutcome => 'unsettled'),
      ),
    );
    return {
      batchItemFailures: batchItemFailures(
        deliveries.map((delivery, i) => ({
          messageId: delivery.raw.messageId,
          group: delivery.orderingKey,
          finished: delivery.finished,
          outcome: outcomes[i]!,
        })),
      ),
    };
  }

  /** When handlers must have returned: the invocation's deadline less the margin. */
  private workDeadline(context: Context | undefined): number | undefined {
    const remaining = context?.getRemainingTimeInMillis?.();
    if (typeof remaining !== 'number' || !Number.isFinite(remaining)) return undefined;
    return Date.now() + remaining - this.settings.deadlineMarginMs;
  }
}

function recordsOf(event: SQSEvent): SQSEvent['Records'] {
  const records = (event as Partial<SQSEvent> | undefined)?.Records;
  if (!Array.isArray(records))
    throw new ConfigurationError(
      'event',
      'is not an SQS event (no Records): is this function mapped to an SQS queue?',
    );
  return records;
}
