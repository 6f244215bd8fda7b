import type { Message, SQSClient } from '@aws-sdk/client-sqs';
import { ConfigurationError } from '../../src/errors.js';
import { intOption, refuseRenamed } from '../../src/option-checks.js';
import { SQS_LIMITS } from './limits.js';

/** How the raw SQS `Body` string becomes the message handed to the handler. */
export type BodyParser<T> = 'json' | 'text' | ((body: string) => T);

/**
 * Where a FIFO queue deduplicates `MessageDeduplicationId`s: across the whole queue
 * (the SQS default) or within each message group (high-throughput FIFO queues).
 */
export type DeduplicationScope = 'queue' | 'messageGroup';

/** Derives the dedup key of an SQS message; `undefined` means no key (dead-lettered). */
export type SqsKeyFunction = (message: Message) => string | undefined;

/** The `key` option of {@link sqsSource}: a message attribute's name, or a function. */
export type SqsKey = string | SqsKeyFunction;

/** Options of {@link sqsSource}. */
export interface SqsSourceOptions<T = unknown> {
  /** The SQS client to use (`new SQSClient({ region })`). The adapter never destroys it. */
  client: SQSClient;
  /** URL of the queue to consume. A URL ending in `.fifo` is treated as a FIFO queue. */
  queueUrl: string;
  /** Messages requested per ReceiveMessage (`MaxNumberOfMessages`). Default 10, 1..10. */
  batchSize?: number;
  /**
   * ReceiveMessage calls in flight at once, each for up to `batchSize` messages while
   * the consumer has room. One receive returns at most 10 messages, so a consumer with
   * high `concurrency` or batch mode needs several to stay fed. Default 1, 1..50.
   */
  receiveConcurrency?: number;
  /**
   * Long-poll duration of one ReceiveMessage, in seconds. Default 20, 0..20. With 0
   * (short polling) an empty receive is followed by a 200 ms pause.
   */
  waitTimeSeconds?: number;
  /**
   * Visibility timeout requested on receive and re-applied by each heartbeat, in whole
   * seconds, 1..43 200. Default: the queue's own `VisibilityTimeout` (read at start;
   * 30 s, the SQS default, if it cannot be read).
   */
  visibilityTimeout?: number;
  /**
   * Keep a received message invisible while it waits for or runs its handler by
   * extending its visibility before it lapses. `true` (default): every third of the
   * visibility timeout. A number: that interval in seconds (may be fractional; must be
   * below the visibility timeout). `false`: never extend; a handler that outlives the
   * visibility timeout races a redelivery (the claim still keeps the effect single).
   */
  heartbeat?: boolean | number;
  /**
   * Where the dedup key comes from, the one place to choose it (see
   * `docs/keys-and-the-dedup-window.md`):
   * - the name of a String (or Number) message attribute holding it, e.g.
   *   `'Idempotency-Key'`: a message without it has no key and goes the dead-letter way;
   * - or a function of the SQS message; `undefined` means no key (dead-lettered).
   *
   * Default: the `eo-outbox-id` attribute an outbox relay sets, else FIFO:
   * `MessageDeduplicationId`, standard: `MessageId`.
   */
  key?: SqsKey;
  /**
   * How the `Body` string is decoded for the handler: `'json'` (default) `JSON.parse`,
   * `'text'` the string itself, or a function (throw to reject the body). A body that
   * cannot be decoded never reaches the handler: it goes the dead-letter way.
   */
  parse?: BodyParser<T>;
  /**
   * Queue that dead letters are moved to explicitly (SendMessage, then delete the
   * original). Default: none, the queue's own redrive policy moves them (see README).
   */
  deadLetterQueueUrl?: string;
  /** Milliseconds a delete waits for more deletes to fill a `DeleteMessageBatch`. Default 10, 0..1000. */
  deleteBatchDelayMs?: number;
  /** Attempts of one delete (whole-request or per-entry failures) before giving up. Default 3, 1..10. */
  deleteAttempts?: number;
  /** Delay after a failed ReceiveMessage, doubling up to `maxMs`. Default `{ initialMs: 1000, maxMs: 30000 }`. */
  pollErrorBackoff?: { initialMs?: number; maxMs?: number };
  /**
   * Check the queue at start with GetQueueAttributes (its visibility timeout, redrive
   * policy and FIFO deduplication scope); a missing queue makes `run` fail fast.
   * Default true.
   */
  verifyQueue?: boolean;
  /**
   * FIFO queues: where the queue deduplicates `MessageDeduplicationId`s. With
   * `'messageGroup'` a dedup id is unique only within its group, so the default key is
   * the group id, a space and the dedup id (`g1 order-7`; neither id can contain a space).
   * Default: the queue's `DeduplicationScope` attribute, read at start; `'queue'` when it
   * cannot be read. When given and the queue says otherwise, `run` fails.
   */
  deduplicationScope?: DeduplicationScope;
}

/** {@link SqsSourceOptions} with defaults applied, after validation. */
export interface ResolvedSqsOptions<T> {
  client: SQSClient;
  queueUrl: string;
  fifo: boolean;
  batchSize: number;
  receiveConcurrency: number;
  waitTimeSeconds: number;
  visibilityTimeout: number | undefined;
  heartbeat: boolean | number;
  /** The attribute named by a string `key`. */
  keyAttribute: string | undefined;
  /** A function `key`. */
  key: SqsKeyFunction | undefined;
  parse: BodyParser<T>;
  deadLetterQueueUrl: string | undefined;
  deleteBatchDelayMs: number;
  deleteAttempts: number;
  pollErrorBackoff: { initialMs: number; maxMs: number };
  verifyQueue: boolean;
  deduplicationScope: DeduplicationScope | undefined;
}

/** Validates options against SQS limits and applies defaults; throws {@link ConfigurationError}. */
export function resolveSqsOptions<T>(options: SqsSourceOptions<T>): ResolvedSqsOptions<T> {
  refuseRenamed(options, { keyAttribute: "use key: '<attribute name>'" });
  const { client, queueUrl } = options;
  if (typeof client?.send !== 'function') {
    throw new ConfigurationError('client', 'must be an SQSClient from @aws-sdk/client-sqs');
  }
  checkUrl('queueUrl', queueUrl);
  if (options.deadLetterQueueUrl !== undefined) {
    checkUrl('deadLetterQueueUrl', options.deadLetterQueueUrl);
    if (options.deadLetterQueueUrl === queueUrl) {
      throw new ConfigurationError('deadLetterQueueUrl', 'must differ from queueUrl');
    }
  }
  const batchSize = intOption('batchSize', options.batchSize, 10, 1, SQS_LIMITS.maxBatchSize);
  const receiveConcurrency = intOption('receiveConcurrency', options.receiveConcurrency, 1, 1, 50);
  const waitTimeSeconds = intOption(
    'waitTimeSeconds',
    options.waitTimeSeconds,
    20,
    0,
    SQS_LIMITS.maxWaitTimeSeconds,
  );
  const visibilityTimeout =
    options.visibilityTimeout === undefined
      ? undefined
      : intOption(
          'visibilityTimeout',
          options.visibilityTimeout,
          0,
          1,
          SQS_LIMITS.maxVisibilityTimeoutSeconds,
        );
  const heartbeat = options.heartbeat ?? true;
  if (typeof heartbeat === 'number') {
    if (!Number.isFinite(heartbeat) || heartbeat <= 0) {
      throw new ConfigurationError(
        'heartbeat',
        'must be a boolean or a positive number of seconds',
        { value: heartbeat },
      );
    }
    if (visibilityTimeout !== undefined && heartbeat >= visibilityTimeout) {
      throw new ConfigurationError('heartbeat', 'interval must be shorter than visibilityTimeout', {
        value: heartbeat,
        visibilityTimeout,
      });
    }
  } else if (typeof heartbeat !== 'boolean') {
    throw new ConfigurationError('heartbeat', 'must be a boolean or a positive number of seconds');
  }
  const { keyAttribute, key } = sqsKeyOption(options.key);
  const parse = options.parse ?? 'json';
  if (parse !== 'json' && parse !== 'text' && typeof parse !== 'function') {
    throw new ConfigurationError('parse', "must be 'json', 'text' or a function", {
      value: String(parse),
    });
  }
  const backoff = options.pollErrorBackoff ?? {};
  const initialMs = intOption('pollErrorBackoff.initialMs', backoff.initialMs, 1000, 0, 3_600_000);
  const maxMs = intOption('pollErrorBackoff.maxMs', backoff.maxMs, 30_000, initialMs, 3_600_000);
  return {
    client,
    queueUrl,
    fifo: isFifoQueueUrl(queueUrl),
    batchSize,
    receiveConcurrency,
    waitTimeSeconds,
    visibilityTimeout,
    heartbeat,
    keyAttribute,
    key,
    parse,
    deadLetterQueueUrl: options.deadLetterQueueUrl,
    deleteBatchDelayMs: intOption('deleteBatchDelayMs', options.deleteBatchDelayMs, 10, 0, 1000),
    deleteAttempts: intOption('deleteAttempts', options.deleteAttempts, 3, 1, 10),
    pollErrorBackoff: { initialMs, maxMs },
    verifyQueue: options.verifyQueue ?? true,
    deduplicationScope: deduplicationScopeOption(options.deduplicationScope),
  };
}

/** Splits a `key` option (sqsSource and withDedup) into an attribute name or a function. */
export function sqsKeyOption(key: unknown): {
  keyAttribute: string | undefined;
  key: SqsKeyFunction | undefined;
} {
  if (key === undefined) return { keyAttribute: undefined, key: undefined };
  if (typeof key === 'function') return { keyAttribute: undefined, key: key as SqsKeyFunction };
  if (typeof key === 'string' && key !== '') return { keyAttribute: key, key: undefined };
  throw new ConfigurationError(
    'key',
    'must be a message attribute name or a function (message) => string | undefined',
  );
}

/** Checks a `deduplicationScope` option (sqsSource and withDedup). */
export function deduplicationScopeOption(value: unknown): DeduplicationScope | undefined {
  if (value === undefined || value === 'queue' || value === 'messageGroup') return value;
  throw new ConfigurationError('deduplicationScope', "must be 'queue' or 'messageGroup'", {
    value: typeof value === 'string' ? value : typeof value,
  });
}

/** Whether a queue URL names a FIFO queue (SQS requires FIFO queue names to end in `.fifo`). */
export function isFifoQueueUrl(queueUrl: string): boolean {
  return queueUrl.endsWith('.fifo');
}

function checkUrl(option: string, value: unknown): void {
  if (typeof value !== 'string' || value === '') {
    throw new ConfigurationError(option, 'must be a non-empty queue URL');
  }
  if (!URL.canParse(value)) {
    throw new ConfigurationError(
      option,
      'must be an absolute queue URL such as https://sqs.us-east-1.amazonaws.com/123456789012/orders',
      {
        value,
      },
    );
  }
}
