import type { Pool } from 'pg';
import { ConfigurationError } from '../../src/errors.js';
import { intOption, refuseRenamed } from '../../src/option-checks.js';
import { quoteIdentifier } from '../../src/store/identifiers.js';
import type {
  KafkaConsumerConfig,
  KafkaConsumerLike,
  KafkaLike,
  KafkaProducerConfig,
  KafkaProducerLike,
} from './client.js';
import type { KafkaParse } from './decode.js';
import { kafkaKeyOption, type KafkaKey, type KafkaKeyFunction } from './keys.js';
import { DEFAULT_OFFSETS_TABLE } from '../../src/store/kafka-offsets.js';
import type { KafkaRecord } from './record.js';

/** Options of {@link kafkaSource}. */
export interface KafkaSourceOptions<T = unknown> {
  /**
   * A kafkajs `Kafka` instance (or compatible). The adapter creates the consumer (with
   * `groupId` and `consumerConfig`) and the dead-letter producer, and disconnects both
   * on close. Give exactly one of `kafka` and `consumer`.
   */
  kafka?: KafkaLike;
  /**
   * A consumer you created with the same `groupId`, not yet running. The adapter
   * connects, subscribes and runs it, and stops it on close without disconnecting it.
   */
  consumer?: KafkaConsumerLike;
  /** Producer for dead letters. Default: `kafka.producer(producerConfig)`. Required with `consumer`. */
  producer?: KafkaProducerLike;
  /** Consumer group id. Also names the group's rows when `offsets: 'postgres'`. Required. */
  groupId: string;
  /** Topics to subscribe to (names, at least one). Required. */
  topics: string[];
  /** Where a group with no committed offset starts: the earliest record (true) or the next one produced (false, default). */
  fromBeginning?: boolean;
  /** Extra settings for the consumer the adapter creates from `kafka` (session timeout, fetch sizes...). Default `{}`. */
  consumerConfig?: KafkaConsumerConfig;
  /** Extra settings for the dead-letter producer the adapter creates from `kafka`. Default `{}`. */
  producerConfig?: KafkaProducerConfig;
  /**
   * Where the dedup key comes from, the one place to choose it (see
   * `docs/keys-and-the-dedup-window.md`): the name of the header holding it (matched
   * exactly, else case-insensitively; a record without it is keyed by its `eo-outbox-id`
   * header, set by effectively-once/outbox's relay, else
   * `topic/partition/offset/timestamp`), or a function of the record, replacing that rule.
   * Default `'idempotency-key'`.
   */
  key?: KafkaKey;
  /** How the value becomes the message: `'json'` (default), `'text'`, `'buffer'` or a function. */
  parse?: KafkaParse<T>;
  /**
   * Partitions whose records are handled at the same time (kafkajs
   * `partitionsConsumedConcurrently`). Default: no limit besides the consumer's `concurrency`.
   */
  partitionConcurrency?: number;
  /**
   * Records of one partition handled at the same time, never two of one Kafka key (records
   * of a key stay in order). Default 1: a partition is handled strictly in order. 1..1000.
   */
  keyConcurrency?: number;
  /**
   * Consecutive records of one ordering key (the partition, or one Kafka key with
   * `keyConcurrency`) handed to the runner at once. The runner keeps them in order, and in
   * batch mode claims and applies them in one transaction, so this is what lets batch mode
   * batch a strictly ordered partition. When one is retried, the ones handed over after
   * it are taken back and follow it. Default 1 (one at a time), 1..1000.
   */
  pipeline?: number;
  /**
   * Records of one partition received but not yet committable (queued, in flight, or
   * finished behind an unfinished one). At this bound the partition is paused until half
   * of them are done. Default 1000, 1..1 000 000.
   */
  maxPendingPerPartition?: number;
  /** How often finished offsets are committed to Kafka; 0 commits as soon as they advance. Default 1000 ms. */
  commitIntervalMs?: number;
  /**
   * Delay before a record whose settlement failed (dead-letter topic unreachable, runner
   * outcome unknown) is delivered again. Default 1000 ms.
   */
  redeliveryDelayMs?: number;
  /** Dead-letter topic of a record. Default `${record.topic}.dlq`. The topic must exist or be auto-created. */
  deadLetterTopic?: string | ((record: KafkaRecord) => string);
  /**
   * `'kafka'` (default): progress lives in the group's committed offsets only.
   * `'postgres'`: each effect's transaction also stores the partition's next offset, the
   * consumer starts each assigned partition there, and records below it are skipped as
   * known duplicates, even after the group's Kafka offsets were reset.
   */
  offsets?: 'kafka' | 'postgres';
  /** Pool of the database holding the offsets table (the consumer's pool). Required with `offsets: 'postgres'`. */
  pool?: Pool;
  /** Schema of the offsets table. Default `public`. */
  offsetsSchema?: string;
  /** Name of the offsets table (create it with `migrateKafkaOffsets`). Default `eo_kafka_offsets`. */
  offsetsTable?: string;
}

/** {@link KafkaSourceOptions} with defaults filled in and bounds checked. */
export interface KafkaSourceConfig<T> {
  kafka: KafkaLike | undefined;
  consumer: KafkaConsumerLike | undefined;
  producer: KafkaProducerLike | undefined;
  groupId: string;
  topics: string[];
  fromBeginning: boolean;
  consumerConfig: KafkaConsumerConfig;
  producerConfig: KafkaProducerConfig;
  /** The header a string `key` names (default `idempotency-key`). */
  idempotencyHeader: string;
  /** A function `key`. */
  key: KafkaKeyFunction | undefined;
  parse: KafkaParse<T>;
  partitionConcurrency: number;
  keyConcurrency: number;
  pipeline: number;
  maxPendingPerPartition: number;
  commitIntervalMs: number;
  redeliveryDelayMs: number;
  deadLetterTopic: (record: KafkaRecord) => string;
  offsets: 'kafka' | 'postgres';
  pool: Pool | undefined;
  offsetsSchema: string;
  offsetsTable: string;
}

/** Validates options at construction; a {@link ConfigurationError} names the first bad one. */
export function resolveKafkaOptions<T>(options: KafkaSourceOptions<T>): KafkaSourceConfig<T> {
  if (typeof options !== 'object' || options === null)
    throw new ConfigurationError('options', 'must be an object');
  refuseRenamed(options, { idempotencyHeader: "use key: '<header name>'" });
  const { kafka, consumer, producer } = options;
  if ((kafka === undefined) === (consumer === undefined)) {
    throw new ConfigurationError(
      'kafka',
      'give exactly one of `kafka` (a kafkajs Kafka) and `consumer`',
    );
  }
  if (
    kafka !== undefined &&
    (typeof kafka.consumer !== 'function' || typeof kafka.producer !== 'function')
  ) {
    throw new ConfigurationError(
      'kafka',
      'must be a kafkajs Kafka instance (with consumer() and producer())',
    );
  }
  if (consumer !== undefined) {
    for (const method of [
      'connect',
      'subscribe',
      'run',
      'stop',
      'commitOffsets',
      'seek',
      'pause',
      'resume',
      'on',
    ] as const) {
      if (typeof consumer[method] !== 'function') {
        throw new ConfigurationError(
          'consumer',
          `must be a kafkajs Consumer (missing ${method}())`,
        );
      }
    }
    if (producer === undefined) {
      throw new ConfigurationError(
        'producer',
        'is required with `consumer`: dead letters are produced with it',
      );
    }
  }
  if (producer !== undefined && typeof producer.send !== 'function') {
    throw new ConfigurationError('producer', 'must be a kafkajs Producer (with send())');
  }
  if (typeof options.groupId !== 'string' || options.groupId.length === 0) {
    throw new ConfigurationError('groupId', 'must be a non-empty string');
  }
  const topics = options.topics;
  if (
    !Array.isArray(topics) ||
    topics.length === 0 ||
    !topics.every((t) => typeof t === 'string' && t.length > 0)
  ) {
    throw new ConfigurationError('topics', 'must be a non-empty array of topic names');
  }
  const { header: idempotencyHeader, key } = kafkaKeyOption(options.key);
  const parse = options.parse ?? 'json';
  if (typeof parse !== 'function' && parse !== 'json' && parse !== 'text' && parse !== 'buffer') {
    throw new ConfigurationError(
      'parse',
      "must be 'json', 'text', 'buffer' or a function (record) => body",
    );
  }
  const offsets = options.offsets ?? 'kafka';
  if (offsets !== 'kafka' && offsets !== 'postgres') {
    throw new ConfigurationError('offsets', "must be 'kafka' or 'postgres'", { offsets });
  }
  if (offsets === 'postgres' && typeof options.pool?.query !== 'function') {
    throw new ConfigurationError(
      'pool',
      "is required with offsets: 'postgres' (a pg Pool of the consumer's database)",
    );
  }
  const offsetsSchema = options.offsetsSchema ?? 'public';
  const offsetsTable = options.offsetsTable ?? DEFAULT_OFFSETS_TABLE;
  quoteIdentifier(offsetsSchema, 'offsetsSchema');
  quoteIdentifier(offsetsTable, 'offsetsTable');
  return {
    kafka,
    consumer,
    producer,
    groupId: options.groupId,
    topics: [...topics],
    fromBeginning: bool('fromBeginning', options.fromBeginning, false),
    consumerConfig: { ...options.consumerConfig },
    producerConfig: { ...options.producerConfig },
    idempotencyHeader,
    key,
    parse,
    partitionConcurrency:
      options.partitionConcurrency === undefined || options.partitionConcurrency === Infinity
        ? Infinity
        : intOption('partitionConcurrency', options.partitionConcurrency, 1, 1, 10_000),
    keyConcurrency: intOption('keyConcurrency', options.keyConcurrency, 1, 1, 1000),
    pipeline: intOption('pipeline', options.pipeline, 1, 1, 1000),
    maxPendingPerPartition: intOption(
      'maxPendingPerPartition',
      options.maxPendingPerPartition,
      1000,
      1,
      1_000_000,
    ),
    commitIntervalMs: intOption('commitIntervalMs', options.commitIntervalMs, 1000, 0, 3_600_000),
    redeliveryDelayMs: intOption(
      'redeliveryDelayMs',
      options.redeliveryDelayMs,
      1000,
      0,
      3_600_000,
    ),
    deadLetterTopic: deadLetterTopic(options.deadLetterTopic),
    offsets,
    pool: options.pool,
    offsetsSchema,
    offsetsTable,
  };
}

function deadLetterTopic(
  option: KafkaSourceOptions['deadLetterTopic'],
): (record: KafkaRecord) => string {
  if (option === undefined) return (record) => `${record.topic}.dlq`;
  if (typeof option === 'function') return option;
  if (typeof option === 'string' && option.length > 0) return () => option;
  throw new ConfigurationError(
    'deadLetterTopic',
    'must be a topic name or a function (record) => topic',
  );
}

function bool(option: string, value: boolean | undefined, fallback: boolean): boolean {
  const v = value ?? fallback;
  if (typeof v !== 'boolean') throw new ConfigurationError(option, 'must be a boolean', { value });
  return v;
}
