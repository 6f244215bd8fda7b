import { resolveBackoff, type BackoffFn } from '../backoff.js';
import { ConfigurationError } from '../errors.js';
import { intOption, refuseRenamed } from '../option-checks.js';
import { isWellFormedText } from '../keys.js';
import { DOOR_DEFAULTS, resolveSharedOptions, type SharedConfig } from '../shared-options.js';
import type { ConsumerOptions } from './options.js';
import type { ConsumerTelemetry } from './telemetry.js';
import type { BatchHandler, Handler, MismatchPolicy, Source } from '../types.js';
import type { PoolClient } from 'pg';
import type { DataLayer } from '../data-layer.js';

/** {@link ConsumerOptions} with every default filled in and every bound checked. */
export interface ConsumerConfig<T, Tx = PoolClient> extends SharedConfig<ConsumerTelemetry> {
  name: string;
  source: Source<T>;
  handler: Handler<T, Tx> | undefined;
  batchHandler: BatchHandler<T, Tx> | undefined;
  /** Undefined: the claim transaction is the library's own, on `pool`. */
  dataLayer: DataLayer<Tx> | undefined;
  /** Batch mode settings; undefined for one transaction per message. */
  batch: { maxSize: number; maxWaitMs: number } | undefined;
  concurrency: number;
  payloadHash: boolean;
  onMismatch: MismatchPolicy;
  maxAttempts: number;
  backoff: BackoffFn;
  busyRetryDelayMs: number;
  /** The admission floor; undefined when off (no window, or `admissionFloor: false`). */
  admissionFloor: AdmissionFloor | undefined;
}

/** A resolved admission floor. */
export interface AdmissionFloor {
  /** A delivery first sent longer ago than this is refused: the window minus the margin. */
  lifetimeMs: number;
  /** Whether deliveries with `firstSentBy: 'producer'` are floored too. */
  producerTimestamps: boolean;
}

/** The default margin: a tenth of the window, at most an hour. */
const MAX_DEFAULT_MARGIN_MS = 3_600_000;

/** What the broker side (admission, settling) reads of the config: nothing of `Tx`'s. */
export type ConsumerSettings<T> = Omit<ConsumerConfig<T>, 'handler' | 'batchHandler' | 'dataLayer'>;

/** Validates options at construction so a typo fails at deploy time, not at 3 a.m. */
export function resolveConfig<T, Tx>(options: ConsumerOptions<T, Tx>): ConsumerConfig<T, Tx> {
  if (typeof options !== 'object' || options === null) {
    throw new ConfigurationError('options', 'must be an object');
  }
  // The name is half the dedup table's primary key: stored as itself or refused (NUL
  // cannot be stored; a lone surrogate would be sent as U+FFFD, merging two names).
  if (
    typeof options.name !== 'string' ||
    options.name.length === 0 ||
    options.name.length > 200 ||
    options.name.includes('\u0000') ||
    !isWellFormedText(options.name)
  ) {
    throw new ConfigurationError(
      'name',
      'must be a non-empty string of at most 200 characters, no NUL, no lone UTF-16 surrogate',
    );
  }
  refuseRenamed(options, {
    key: "the dedup key is the source's own option (sqsSource's or kafkaSource's `key`)",
  });
  const source = options.source;
  if (typeof source?.run !== 'function' || typeof source.close !== 'function') {
    throw new ConfigurationError(
      'source',
      'must be a Source (e.g. sqsSource(), kafkaSource(), memorySource())',
    );
  }
  const { handler, batchHandler } = options;
  if ((handler === undefined) === (batchHandler === undefined)) {
    throw new ConfigurationError('handler', 'give exactly one of handler or batchHandler');
  }
  if (handler !== undefined && typeof handler !== 'function') {
    throw new ConfigurationError('handler', 'must be a function (message, ctx) => Promise<void>');
  }
  if (batchHandler !== undefined && typeof batchHandler !== 'function') {
    throw new ConfigurationError(
      'batchHandler',
      'must be a function (items, ctx) => Promise<void>',
    );
  }
  const batched = options.batch !== undefined || batchHandler !== undefined;
  const onMismatch = options.onMismatch ?? 'dead-letter';
  if (onMismatch !== 'dead-letter' && onMismatch !== 'ack') {
    throw new ConfigurationError('onMismatch', "must be 'dead-letter' or 'ack'", { onMismatch });
  }
  const shared = resolveSharedOptions(options, DOOR_DEFAULTS.consumer, {
    type: 'ConsumerTelemetry',
    methods: ['startDelivery', 'startBatch'],
  });
  return {
    ...shared,
    name: options.name,
    source,
    handler,
    batchHandler,
    // Checked by resolveSharedOptions; kept typed by the layer's transaction object.
    dataLayer: shared.dataLayer === undefined ? undefined : options.dataLayer,
    batch: batched
      ? {
          maxSize: intOption('batch.maxSize', options.batch?.maxSize, 100, 1, 10_000),
          maxWaitMs: intOption('batch.maxWaitMs', options.batch?.maxWaitMs, 5, 0, 60_000),
        }
      : undefined,
    concurrency: intOption('concurrency', options.concurrency, 10, 1, 1000),
    payloadHash: options.payloadHash ?? true,
    onMismatch,
    maxAttempts: intOption('maxAttempts', options.maxAttempts, 5, 1, 1000),
    backoff: resolveBackoff(options.backoff),
    busyRetryDelayMs: intOption('busyRetryDelayMs', options.busyRetryDelayMs, 2000, 0, 43_200_000),
    // From the resolved retention: its olderThanMs is checked by then.
    admissionFloor: resolveFloor(options.admissionFloor, shared.retention?.olderThanMs),
  };
}

/**
 * The floor from its option and the consumer's own retention: on by default when this
 * consumer prunes (its rows are kept `retention.olderThanMs`), off without a window.
 */
function resolveFloor(
  option: ConsumerOptions<unknown, unknown>['admissionFloor'],
  retentionMs: number | undefined,
): AdmissionFloor | undefined {
  if (option === false) return undefined;
  if (option !== undefined && option !== true && (typeof option !== 'object' || option === null)) {
    throw new ConfigurationError(
      'admissionFloor',
      'must be a boolean or { marginMs, windowMs, producerTimestamps }',
    );
  }
  const given = typeof option === 'object' ? option : {};
  // Beside `retention`, `windowMs` is a shorter window to floor by: after a deploy that
  // lengthened retention, rows written under the old, shorter one expire sooner than this
  // instance's, so the floor keeps the old window until it has passed. Never longer than
  // this instance's own rows live: that would admit what its own pruner made unknowable.
  const windowMs =
    given.windowMs === undefined
      ? retentionMs
      : intOption('admissionFloor.windowMs', given.windowMs, 0, 1, Number.MAX_SAFE_INTEGER);
  if (given.windowMs !== undefined && retentionMs !== undefined && given.windowMs > retentionMs) {
    throw new ConfigurationError(
      'admissionFloor.windowMs',
      'must not be longer than retention.olderThanMs: rows pruned sooner would be admitted again',
      { value: given.windowMs },
    );
  }
  if (windowMs === undefined) {
    // Nothing prunes this consumer's rows that it knows of: no claim ever expires.
    if (option === undefined) return undefined;
    throw new ConfigurationError(
      'admissionFloor',
      'needs a window: set retention.olderThanMs, or admissionFloor.windowMs when a prune job prunes',
    );
  }
  const marginMs = intOption(
    'admissionFloor.marginMs',
    given.marginMs,
    Math.min(MAX_DEFAULT_MARGIN_MS, Math.floor(windowMs / 10)),
    0,
    windowMs - 1,
  );
  const producerTimestamps = given.producerTimestamps ?? false;
  if (typeof producerTimestamps !== 'boolean') {
    throw new ConfigurationError('admissionFloor.producerTimestamps', 'must be a boolean');
  }
  return { lifetimeMs: windowMs - marginMs, producerTimestamps };
}
