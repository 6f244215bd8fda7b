/**
 * The slice of the kafkajs API this adapter uses, typed structurally: a kafkajs
 * `Kafka`, `Consumer` or `Producer` fits as is, and so does any KafkaJS-compatible
 * client, without this package importing kafkajs at run time or in its types.
 */

/** A header value as kafkajs hands it over (repeated headers arrive as an array). */
export type KafkaHeaderValue = Buffer | string | ReadonlyArray<Buffer | string> | undefined;

/** Record headers by name. */
export interface KafkaHeaders {
  readonly [name: string]: KafkaHeaderValue;
}

/** One record of a fetched batch (kafkajs `KafkaMessage`). */
export interface KafkaMessageLike {
  readonly key: Buffer | null;
  readonly value: Buffer | null;
  /** Int64 offset as a decimal string. */
  readonly offset: string;
  readonly timestamp: string;
  readonly headers?: KafkaHeaders | undefined;
}

/** A fetched batch of one partition (kafkajs `Batch`). */
export interface KafkaBatchLike {
  readonly topic: string;
  readonly partition: number;
  readonly messages: ReadonlyArray<KafkaMessageLike>;
  /** The partition's log end offset when the batch was fetched, as a decimal string. */
  readonly highWatermark?: string;
}

/** What `eachBatch` receives (kafkajs `EachBatchPayload`). */
export interface EachBatchPayloadLike {
  readonly batch: KafkaBatchLike;
  /** Moves the partition's fetch position past `offset`. */
  resolveOffset(offset: string): void;
  /** Heartbeats the group; throws when a rebalance is in progress. */
  heartbeat(): Promise<void>;
  /** False once the consumer is stopping. */
  isRunning(): boolean;
  /** True when a seek is pending for this partition: the batch is outdated. */
  isStale(): boolean;
}

/** Options of kafkajs `consumer.run` that this adapter sets. */
export interface KafkaRunConfig {
  eachBatch: (payload: EachBatchPayloadLike) => Promise<void>;
  eachBatchAutoResolve: boolean;
  autoCommit: boolean;
  partitionsConsumedConcurrently: number;
}

/** A topic and some of its partitions. */
export interface KafkaTopicPartitions {
  topic: string;
  partitions: number[];
}

/** A position to commit or seek to: `offset` is the next offset to read. */
export interface KafkaTopicPartitionOffset {
  topic: string;
  partition: number;
  offset: string;
}

/** kafkajs `consumer.group_join` instrumentation event: the member's new assignment. */
export interface KafkaGroupJoinEvent {
  readonly payload: { readonly memberAssignment: Readonly<Record<string, ReadonlyArray<number>>> };
}

/** kafkajs `consumer.crash` instrumentation event. */
export interface KafkaCrashEvent {
  readonly payload: { readonly error: Error; readonly restart: boolean };
}

/** The consumer API the adapter drives (kafkajs `Consumer`). */
export interface KafkaConsumerLike {
  connect(): Promise<void>;
  disconnect(): Promise<void>;
  subscribe(subscription: { topics: string[]; fromBeginning?: boolean }): Promise<void>;
  run(config: KafkaRunConfig): Promise<void>;
  stop(): Promise<void>;
  commitOffsets(offsets: KafkaTopicPartitionOffset[]): Promise<void>;
  seek(position: KafkaTopicPartitionOffset): void;
  pause(topics: KafkaTopicPartitions[]): void;
  resume(topics: KafkaTopicPartitions[]): void;
  on(event: 'consumer.group_join', listener: (event: KafkaGroupJoinEvent) => void): unknown;
  on(event: 'consumer.rebalancing', listener: (event: unknown) => void): unknown;
  on(event: 'consumer.crash', listener: (event: KafkaCrashEvent) => void): unknown;
}

/** A record the adapter produces (to the dead-letter topic). */
export interface KafkaOutgoingMessage {
  key?: Buffer | string | null;
  value: Buffer | string | null;
  headers?: Record<string, Buffer | string | Array<Buffer | string>>;
}

/** The producer API the adapter uses for dead letters (kafkajs `Producer`). */
export interface KafkaProducerLike {
  connect(): Promise<void>;
  disconnect(): Promise<void>;
  send(record: {
    topic: string;
    acks?: number;
    messages: KafkaOutgoingMessage[];
  }): Promise<unknown>;
}

/**
 * Consumer settings passed through to `kafka.consumer()` when the adapter creates the
 * consumer (a subset of kafkajs `ConsumerConfig`; pass your own `consumer` for the rest).
 */
export interface KafkaConsumerConfig {
  sessionTimeout?: number;
  rebalanceTimeout?: number;
  heartbeatInterval?: number;
  metadataMaxAge?: number;
  maxBytesPerPartition?: number;
  minBytes?: number;
  maxBytes?: number;
  maxWaitTimeInMs?: number;
  allowAutoTopicCreation?: boolean;
  maxInFlightRequests?: number;
  readUncommitted?: boolean;
  rackId?: string;
  retry?: {
    maxRetryTime?: number;
    initialRetryTime?: number;
    factor?: number;
    multiplier?: number;
    retries?: number;
  };
}

/** Producer settings passed through to `kafka.producer()` (a subset of kafkajs `ProducerConfig`). */
export interface KafkaProducerConfig {
  allowAutoTopicCreation?: boolean;
  idempotent?: boolean;
  maxInFlightRequests?: number;
  metadataMaxAge?: number;
  retry?: {
    maxRetryTime?: number;
    initialRetryTime?: number;
    factor?: number;
    multiplier?: number;
    retries?: number;
  };
}

/** A kafkajs `Kafka` instance, or anything that makes compatible consumers and producers. */
export interface KafkaLike {
  consumer(config: KafkaConsumerConfig & { groupId: string }): KafkaConsumerLike;
  producer(config?: KafkaProducerConfig): KafkaProducerLike;
}
