/**
 * The slice of the kafkajs API this adapter uses, typed structurally: a kafkajs
 * `Kafka`, `Consumer` or `Producer` fits as is, and so does any KafkaJS-compatible
 * client, without this package importing kafkajs at run time or in its types.
 */

/** A header value as kafkajs hands it over (repeated headers arrive as an array). */
export type KafkaHeaderValue = Buffer | string | ReadonlyArray<Buffer | string> | undefined;

/** Record headers by name. */
export interface KafkaHeaders {
  /** The value of header `name` (kafkajs hands over bytes; a producer may have sent strings). */
  readonly [name: string]: KafkaHeaderValue;
}

/** One record of a fetched batch (kafkajs `KafkaMessage`). */
export interface KafkaMessageLike {
  /** The record key's bytes; `null` when the producer sent none. */
  readonly key: Buffer | null;
  /** The value bytes; `null` for a tombstone. */
  readonly value: Buffer | null;
  /** Int64 offset as a decimal string. */
  readonly offset: string;
  /** Milliseconds since the epoch, as a decimal string. */
  readonly timestamp: string;
  /** The record's headers. */
  readonly headers?: KafkaHeaders | undefined;
}

/** A fetched batch of one partition (kafkajs `Batch`). */
export interface KafkaBatchLike {
  /** Topic of the batch. */
  readonly topic: string;
  /** Partition of the batch. */
  readonly partition: number;
  /** The records, in offset order. */
  readonly messages: ReadonlyArray<KafkaMessageLike>;
  /** The partition's log end offset when the batch was fetched, as a decimal string. */
  readonly highWatermark?: string;
}

/** What `eachBatch` receives (kafkajs `EachBatchPayload`). */
export interface EachBatchPayloadLike {
  /** The fetched batch. */
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
  /** Hands each batch to the partition's worker and returns at once. */
  eachBatch: (payload: EachBatchPayloadLike) => Promise<void>;
  /** Always false: a record is resolved only once it is finished. */
  eachBatchAutoResolve: boolean;
  /** Always false: the adapter commits finished offsets itself. */
  autoCommit: boolean;
  /** kafkajs workers running `eachBatch` at once. */
  partitionsConsumedConcurrently: number;
}

/** A topic and some of its partitions. */
export interface KafkaTopicPartitions {
  /** The topic. */
  topic: string;
  /** Some of its partitions. */
  partitions: number[];
}

/** A position to commit or seek to: `offset` is the next offset to read. */
export interface KafkaTopicPartitionOffset {
  /** The topic. */
  topic: string;
  /** The partition. */
  partition: number;
  /** The next offset to read, as a decimal string. */
  offset: string;
}

/** kafkajs `consumer.group_join` instrumentation event: the member's new assignment. */
export interface KafkaGroupJoinEvent {
  /** Partitions assigned to this member, by topic. */
  readonly payload: { readonly memberAssignment: Readonly<Record<string, ReadonlyArray<number>>> };
}

/** kafkajs `consumer.crash` instrumentation event. */
export interface KafkaCrashEvent {
  /** What crashed the consumer, and whether kafkajs restarts it. */
  readonly payload: { readonly error: Error; readonly restart: boolean };
}

/** The consumer API the adapter drives (kafkajs `Consumer`). */
export interface KafkaConsumerLike {
  /** Connects to the cluster. */
  connect(): Promise<void>;
  /** Leaves the group and closes the connections. */
  disconnect(): Promise<void>;
  /** Subscribes to the source's topics. */
  subscribe(subscription: { topics: string[]; fromBeginning?: boolean }): Promise<void>;
  /** Starts the fetch loop. */
  run(config: KafkaRunConfig): Promise<void>;
  /** Stops the fetch loop without leaving the client. */
  stop(): Promise<void>;
  /** Commits the group's offsets. */
  commitOffsets(offsets: KafkaTopicPartitionOffset[]): Promise<void>;
  /** Moves a partition's fetch position. */
  seek(position: KafkaTopicPartitionOffset): void;
  /** Stops fetching some partitions. */
  pause(topics: KafkaTopicPartitions[]): void;
  /** Fetches paused partitions again. */
  resume(topics: KafkaTopicPartitions[]): void;
  /** A new assignment (the eager protocol's rejoin ended). */
  on(event: 'consumer.group_join', listener: (event: KafkaGroupJoinEvent) => void): unknown;
  /** The member starts rejoining the group. */
  on(event: 'consumer.rebalancing', listener: (event: unknown) => void): unknown;
  /** The consumer crashed; kafkajs may restart it. */
  on(event: 'consumer.crash', listener: (event: KafkaCrashEvent) => void): unknown;
}

/** A record the adapter produces (to the dead-letter topic). */
export interface KafkaOutgoingMessage {
  /** The record key (the source record's, for a dead letter). */
  key?: Buffer | string | null;
  /** The value (the source record's, for a dead letter). */
  value: Buffer | string | null;
  /** The headers (the source record's plus the `eo-*` ones, for a dead letter). */
  headers?: Record<string, Buffer | string | Array<Buffer | string>>;
}

/** The producer API the adapter uses for dead letters (kafkajs `Producer`). */
export interface KafkaProducerLike {
  /** Connects to the cluster (on the first dead letter). */
  connect(): Promise<void>;
  /** Closes the connections. */
  disconnect(): Promise<void>;
  /** Produces records (dead letters, with `acks: -1`). */
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
  /** Ms without a heartbeat before the group evicts the member (kafkajs default 30 000). */
  sessionTimeout?: number;
  /** Ms the group waits for members to rejoin during a rebalance (kafkajs default 60 000). */
  rebalanceTimeout?: number;
  /** Least ms between heartbeats, below a third of `sessionTimeout` (kafkajs default 3000). */
  heartbeatInterval?: number;
  /** Ms before cluster metadata is refreshed. */
  metadataMaxAge?: number;
  /** Most bytes fetched per partition per request (kafkajs default 1 MiB). */
  maxBytesPerPartition?: number;
  /** Fewest bytes a fetch waits for (kafkajs default 1). */
  minBytes?: number;
  /** Most bytes per fetch response (kafkajs default 10 MiB). */
  maxBytes?: number;
  /**
   * Longest ms the broker holds a fetch that has no data (kafkajs default 5000). kafkajs
   * heartbeats between fetches, so keep it at most a third of `sessionTimeout`.
   */
  maxWaitTimeInMs?: number;
  /** Whether subscribing may create a missing topic (a broker setting may forbid it). */
  allowAutoTopicCreation?: boolean;
  /** Requests in flight per broker connection. */
  maxInFlightRequests?: number;
  /** Also read records of open or aborted Kafka transactions (kafkajs default false). */
  readUncommitted?: boolean;
  /** The consumer's rack, for fetching from the nearest replica. */
  rackId?: string;
  /** kafkajs retry settings of the consumer's requests. */
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
  /** Whether producing to a missing topic may create it. */
  allowAutoTopicCreation?: boolean;
  /** kafkajs's idempotent producer (kafkajs default false). */
  idempotent?: boolean;
  /** Requests in flight per broker connection. */
  maxInFlightRequests?: number;
  /** Ms before cluster metadata is refreshed. */
  metadataMaxAge?: number;
  /** kafkajs retry settings of the producer's requests. */
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
  /** Makes a consumer of group `groupId`. */
  consumer(config: KafkaConsumerConfig & { groupId: string }): KafkaConsumerLike;
  /** Makes a producer. */
  producer(config?: KafkaProducerConfig): KafkaProducerLike;
}
