/**
 * The slice of the `@platformatic/kafka` API the translation layer uses, typed
 * structurally (as client.ts does for kafkajs): a `Consumer` and `Producer` of that
 * package fit as they are, and this package never imports it, at run time or in its
 * types, so kafkajs users (and Node 20) need not install it.
 */

/** One record as a `MessagesStream` emits it (with the default Buffer deserializers). */
export interface PlatformaticMessageLike {
  /** Key bytes; `undefined` when the producer sent none. */
  readonly key?: Buffer | undefined;
  /** Value bytes; `undefined` for a tombstone. */
  readonly value?: Buffer | undefined;
  /** Headers in wire order (a repeated name appears more than once). */
  readonly headerEntries: ReadonlyArray<readonly [Buffer, Buffer]>;
  /** Topic of the record. */
  readonly topic: string;
  /** Partition of the record. */
  readonly partition: number;
  /** Milliseconds since the epoch. */
  readonly timestamp: bigint;
  /** The record's offset. */
  readonly offset: bigint;
}

/** A `MessagesStream`: a Readable in object mode, one record per `data` event. */
export interface PlatformaticStreamLike {
  /** Next offset to fetch per `topic:partition` (the stream's own fetch positions). */
  readonly offsetsToFetch: Map<string, bigint>;
  /** Records, in offset order per partition. */
  on(event: 'data', listener: (message: PlatformaticMessageLike) => void): unknown;
  /** A fetch or offset refresh failed for good: the stream is destroyed. */
  on(event: 'error', listener: (error: Error) => void): unknown;
  /** Stops fetching (every partition of the stream). */
  pause(): unknown;
  /** Fetches again. */
  resume(): unknown;
  /** Stops fetching and drops what is in flight. */
  close(): Promise<void>;
}

/** Options of `consumer.consume()` the translation layer sets or passes through. */
export interface PlatformaticConsumeOptions {
  /** The source's topics. */
  topics: string[];
  /** Always `'committed'`: each stream starts at the group's committed offsets. */
  mode: 'committed';
  /** Where a partition with no committed offset starts. */
  fallbackMode: 'earliest' | 'latest';
  /** Always false: the source commits finished offsets itself. */
  autocommit: boolean;
  /** Longest ms the broker holds an empty fetch. */
  maxWaitTime?: number;
  /** Fewest bytes a fetch waits for. */
  minBytes?: number;
  /** Most bytes per fetch response. */
  maxBytes?: number;
  /** Most bytes per partition per fetch. */
  maxBytesPerPartition?: number;
}

/** A partition's position to commit (`offset` is the next one to read). */
export interface PlatformaticCommitOffset {
  /** The topic. */
  topic: string;
  /** The partition. */
  partition: number;
  /** The next offset to read. */
  offset: bigint;
  /** Leader epoch of the last consumed record, -1 when unknown. */
  leaderEpoch: number;
}

/** A topic and this member's partitions of it. */
export interface PlatformaticAssignment {
  /** The topic. */
  topic: string;
  /** Its partitions assigned to this member. */
  partitions: number[];
}

/** The consumer API the translation layer drives (`@platformatic/kafka` `Consumer`). */
export interface PlatformaticConsumerLike {
  /** The consumer group. */
  readonly groupId: string;
  /** This member's partitions in the current generation (null before the first join). */
  readonly assignments: PlatformaticAssignment[] | null;
  /** Joins the group if needed and opens a stream of the assigned partitions' records. */
  consume(options: PlatformaticConsumeOptions): Promise<PlatformaticStreamLike>;
  /** Commits offsets under the current group generation. */
  commit(options: { offsets: PlatformaticCommitOffset[] }): Promise<void>;
  /** Latest offsets (log end) of every partition of `topics`, by topic then partition. */
  listOffsets(options: { topics: string[] }): Promise<Map<string, bigint[]>>;
  /** Leaves the group (the partitions go to the other members at once). */
  leaveGroup(force?: boolean): Promise<void>;
  /** Closes the connections. */
  close(force?: boolean): Promise<void>;
  /** The member joined a generation: its new assignment. */
  on(
    event: 'consumer:group:join',
    listener: (payload: { assignments?: PlatformaticAssignment[] }) => void,
  ): unknown;
  /** The group is rebalancing: the member is about to rejoin. */
  on(event: 'consumer:group:rebalance', listener: (payload: { groupId: string }) => void): unknown;
  /** A rejoin failed for good. */
  on(event: 'error', listener: (error: Error) => void): unknown;
  /** Removes a listener added with `on`. */
  removeListener(event: string, listener: (...args: never[]) => void): unknown;
}

/** A record to produce (Buffers only: the default serializers pass them through). */
export interface PlatformaticMessageToProduce {
  /** The topic. */
  topic: string;
  /** Key bytes. */
  key?: Buffer;
  /** Value bytes; absent for a tombstone. */
  value?: Buffer;
  /** Headers; distinct Buffer keys may repeat a name. */
  headers?: Map<Buffer, Buffer>;
}

/** The producer API used for dead letters (`@platformatic/kafka` `Producer`). */
export interface PlatformaticProducerLike {
  /** Produces records. */
  send(options: { messages: PlatformaticMessageToProduce[]; acks?: number }): Promise<unknown>;
  /** Closes the connections. */
  close(force?: boolean): Promise<void>;
}
