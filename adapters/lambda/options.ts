import type { SQSRecord } from 'aws-lambda';
import type { PoolClient } from 'pg';
import type { ConsumerOptions } from '../../src/consumer/options.js';
import { ConfigurationError } from '../../src/errors.js';
import { intOption } from '../../src/option-checks.js';
import type { DeduplicationScope } from '../sqs/options.js';

/** A record's dedup key: a message attribute's name, or a function of the record. */
export type RecordKey = string | ((record: SQSRecord) => string | undefined);

/**
 * Options of {@link lambdaConsumer}: `createConsumer`'s, without the source (Lambda's
 * event source mapping is the source). The handler receives the `SQSRecord`.
 */
export interface LambdaConsumerOptions<Tx = PoolClient> extends Omit<
  ConsumerOptions<SQSRecord, Tx>,
  'source' | 'key'
> {
  /**
   * Where a record's dedup key comes from: the name of a String message attribute
   * (`'Idempotency-Key'`), or a function of the record (`undefined`: no key, the record
   * is dead-lettered). Default, as `sqsSource`'s: the `eo-outbox-id` attribute of a
   * message an outbox relay sent, else `MessageDeduplicationId` (FIFO), else `messageId`.
   */
  key?: RecordKey;
  /**
   * FIFO queues deduplicating per message group (`DeduplicationScope: messageGroup`):
   * `'messageGroup'` makes the default key `group dedupId`. Default `'queue'`.
   */
  deduplicationScope?: DeduplicationScope;
  /**
   * Time kept free before the invocation's deadline
   * (`context.getRemainingTimeInMillis()`) for the COMMIT and the answer: a record's
   * handler must return this long before it, or it is timed out and rolled back, and a
   * record not started by then is not started. Either is answered in
   * `batchItemFailures`. Default 1 000 ms.
   */
  deadlineMarginMs?: number;
}

/** The options of this adapter, checked; the rest goes to `createConsumer`. */
export interface LambdaSettings {
  readonly key: RecordKey | undefined;
  readonly groupScoped: boolean;
  readonly deadlineMarginMs: number;
}

/** Checks this adapter's own options (a typo fails at the cold start, named). */
export function lambdaSettings(options: LambdaConsumerOptions<unknown>): LambdaSettings {
  if (typeof options !== 'object' || options === null)
    throw new ConfigurationError('options', 'must be an object');
  const { key, deduplicationScope } = options;
  if (key !== undefined && typeof key !== 'function' && (typeof key !== 'string' || key === ''))
    throw new ConfigurationError(
      'key',
      'must be a message attribute name or a function (record) => string | undefined',
    );
  if (
    deduplicationScope !== undefined &&
    deduplicationScope !== 'queue' &&
    deduplicationScope !== 'messageGroup'
  )
    throw new ConfigurationError('deduplicationScope', "must be 'queue' or 'messageGroup'");
  return {
    key,
    groupScoped: deduplicationScope === 'messageGroup',
    deadlineMarginMs: intOption('deadlineMarginMs', options.deadlineMarginMs, 1_000, 0, 900_000),
  };
}
