import type {
  EachBatchPayloadLike,
  KafkaConsumerLike,
  KafkaCrashEvent,
  KafkaGroupJoinEvent,
  KafkaRunConfig,
  KafkaTopicPartitionOffset,
  KafkaTopicPartitions,
} from '../client.js';
import { ConfigurationError } from '../../../src/errors.js';
import { intOption } from '../../../src/option-checks.js';
import { PartitionFeed, type FeedOwner } from './partition-feed.js';
import { generationErrorOf } from './errors.js';
import type {
  PlatformaticAssignment,
  PlatformaticConsumeOptions,
  PlatformaticConsumerLike,
  PlatformaticStreamLike,
} from './types.js';

/** Fetch settings passed through to `consumer.consume()`. */
export type PlatformaticFetchOptions = Pick<
  PlatformaticConsumeOptions,
  'maxWaitTime' | 'minBytes' | 'maxBytes' | 'maxBytesPerPartition'
>;

/** Settings of the translation layer. */
export interface PlatformaticConsumerOptions {
  /** Fetch settings for the streams it opens. Default: the consumer's own. */
  fetch?: PlatformaticFetchOptions;
  /**
   * Records fetched but not yet handed to the source, over all partitions (a paused
   * partition's records wait here). At this bound the stream stops fetching until half
   * are handed over. Default 10 000, 1..10 000 000.
   */
  maxQueuedRecords?: number;
}

/** A failed stream is reopened (from the committed offsets) after this long. */
const RESTART_DELAY_MS = 1000;
/** The listed log end offsets (the batches' high watermark) are refreshed at most this often. */
const END_OFFSETS_MAX_AGE_MS = 1000;

type Listener = (event: never) => void;

/**
 * A `@platformatic/kafka` `Consumer` in the kafkajs `Consumer` shape `kafkaSource`
 * drives, so the source's semantics (order, key concurrency, offsets, dead letters)
 * are the same code for both clients.
 *
 * Generations: kafkajs restarts every partition from its committed offset after each
 * rebalance, and the source counts on it. A `MessagesStream` instead keeps fetching
 * across a rejoin, and a fetch sent before it can land after it; so on each
 * `consumer:group:join` this closes the stream and opens a fresh one (which reads the
 * committed offsets), and drops every record of an older stream.
 */
export class PlatformaticConsumer implements KafkaConsumerLike, FeedOwner {
  private readonly listeners = new Map<string, Set<Listener>>();
  private readonly detach: Array<() => void> = [];
  private readonly maxQueued: number;
  private topics: string[] = [];
  private fromBeginning = false;
  private config: KafkaRunConfig | undefined;
  private stream: PlatformaticStreamLike | undefined;
  private generation = 0;
  private running = false;
  private opening = false;
  private feeds = new Map<string, PartitionFeed>();
  private queued = 0;
  private streamPaused = false;
  private flushQueued = false;
  private ends: Promise<Map<string, bigint[]> | undefined> | undefined;
  private endsAt = 0;

  constructor(
    private readonly client: PlatformaticConsumerLike,
    private readonly options: PlatformaticConsumerOptions = {},
  ) {
    for (const method of ['consume', 'commit', 'listOffsets', 'leaveGroup', 'on'] as const) {
      if (typeof (client as Partial<PlatformaticConsumerLike> | null)?.[method] !== 'function')
        throw new ConfigurationError(
          'consumer',
          `must be a @platformatic/kafka Consumer (missing ${method}())`,
        );
    }
    this.maxQueued = intOption('maxQueuedRecords', options.maxQueuedRecords, 10_000, 1, 10_000_000);
  }

  /** The client connects on first use. */
  async connect(): Promise<void> {}

  /** Stops and closes the client. */
  async disconnect(): Promise<void> {
    await this.stop();
    await this.client.close();
  }

  /** Remembers the topics; the group is joined by `run`. */
  async subscribe(subscription: { topics: string[]; fromBeginning?: boolean }): Promise<void> {
    this.topics = [...subscription.topics];
    this.fromBeginning = subscription.fromBeginning ?? false;
  }

  /** Joins the group and starts handing batches to `config.eachBatch`. */
  async run(config: KafkaRunConfig): Promise<void> {
    this.config = config;
    this.running = true;
    const on = (event: string, listener: (arg: never) => void) => {
      (this.client.on as (e: string, l: (arg: never) => void) => unknown)(event, listener);
      this.detach.push(() => this.client.removeListener(event, listener));
    };
    on('consumer:group:join', (p: { assignments?: PlatformaticAssignment[] }) => this.onJoin(p));
    on('consumer:group:rebalance', () => this.emit('consumer.rebalancing', {}));
    on('error', (error: Error) => this.crash(error, false));
    await this.open(this.generation, true);
  }

  /** Stops fetching and leaves the group; the client stays open. */
  async stop(): Promise<void> {
    if (!this.running) return;
    this.running = false;
    this.generation++;
    this.feeds = new Map();
    for (const remove of this.detach.splice(0)) remove();
    const stream = this.stream;
    this.stream = undefined;
    await stream?.close().catch(() => undefined);
    // Leaving hands the partitions over now rather than after the session timeout.
    await this.client.leaveGroup().catch(() => undefined);
  }

  /** Commits under the current generation; a generation error carries its kafkajs `type`. */
  async commitOffsets(offsets: KafkaTopicPartitionOffset[]): Promise<void> {
    try {
      await this.client.commit({
        offsets: offsets.map(({ topic, partition, offset }) => ({
          topic,
          partition,
          offset: BigInt(offset),
          leaderEpoch: -1,
        })),
      });
    } catch (error) {
      throw generationErrorOf(error) ?? error;
    }
  }

  /** Skips the partition to `position.offset` (see {@link PartitionFeed.seek}). */
  seek(position: KafkaTopicPartitionOffset): void {
    const { topic, partition } = position;
    const offset = BigInt(position.offset);
    const nothingAhead = this.feed(topic, partition).seek(offset);
    const stream = this.stream;
    if (!nothingAhead || stream === undefined) return;
    // Fetch from there instead of reading the skipped records (a fetch already in
    // flight may still move it back; its records below the offset are then dropped).
    const key = `${topic}:${partition}`;
    const at = stream.offsetsToFetch.get(key);
    if (at === undefined || at < offset) stream.offsetsToFetch.set(key, offset);
  }

  /** Holds the partitions' batches (their records keep arriving into the queue). */
  pause(topics: KafkaTopicPartitions[]): void {
    for (const { topic, partitions } of topics)
      for (const partition of partitions) this.feed(topic, partition).pause();
  }

  /** Hands the partitions' batches over again. */
  resume(topics: KafkaTopicPartitions[]): void {
    for (const { topic, partitions } of topics)
      for (const partition of partitions) this.feed(topic, partition).resume();
  }

  /** kafkajs-named events: `consumer.group_join`, `consumer.rebalancing`, `consumer.crash`. */
  on(event: 'consumer.group_join', listener: (event: KafkaGroupJoinEvent) => void): () => void;
  on(event: 'consumer.rebalancing', listener: (event: unknown) => void): () => void;
  on(event: 'consumer.crash', listener: (event: KafkaCrashEvent) => void): () => void;
  on(event: string, listener: Listener): () => void {
    let set = this.listeners.get(event);
    if (set === undefined) this.listeners.set(event, (set = new Set()));
    set.add(listener);
    return () => set.delete(listener);
  }

  /** @internal */
  eachBatch(payload: EachBatchPayloadLike): Promise<void> {
    return (this.config as KafkaRunConfig).eachBatch(payload);
  }

  /** @internal */
  isCurrent(generation: number): boolean {
    return this.running && generation === this.generation;
  }

  /** @internal */
  async endOffset(topic: string, partition: number): Promise<bigint | undefined> {
    const now = Date.now();
    const first = this.ends === undefined;
    if (first || now - this.endsAt >= END_OFFSETS_MAX_AGE_MS) {
      const previous = this.ends;
      this.endsAt = now;
      const listing = this.client.listOffsets({ topics: this.topics }).then(
        (ends) => ends,
        () => previous, // keep the last good listing
      );
      this.ends = listing;
      // Only the generation's first batch waits; later ones use the last listing meanwhile.
      if (!first && previous !== undefined) return (await previous)?.get(topic)?.[partition];
    }
    return (await this.ends)?.get(topic)?.[partition];
  }

  /** @internal */
  drained(count: number, generation: number): void {
    if (generation !== this.generation) return;
    this.queued -= count;
    if (this.streamPaused && this.queued <= this.maxQueued / 2) {
      this.streamPaused = false;
      this.stream?.resume();
    }
  }

  /** @internal */
  failed(error: unknown): void {
    // The source's eachBatch throws only when the generation ended: nothing to redo.
    void error;
  }

  private emit(event: string, payload: unknown): void {
    for (const listener of this.listeners.get(event) ?? [])
      (listener as (e: unknown) => void)(payload);
  }

  private feed(topic: string, partition: number): PartitionFeed {
    const key = `${topic}/${partition}`;
    let feed = this.feeds.get(key);
    if (feed === undefined) {
      feed = new PartitionFeed(topic, partition, this.generation, this);
      this.feeds.set(key, feed);
    }
    return feed;
  }

  /** A new generation: forget the old stream's records and offsets. */
  private nextGeneration(): void {
    this.generation++;
    this.feeds = new Map();
    this.queued = 0;
    this.streamPaused = false;
    this.ends = undefined;
  }

  private onJoin(payload: { assignments?: PlatformaticAssignment[] }): void {
    if (!this.running) return;
    this.nextGeneration();
    const old = this.stream;
    this.stream = undefined;
    this.emitJoin(payload.assignments ?? []);
    // While the first consume() (or a restart) is joining, it brings this generation's stream.
    if (!this.opening) void this.open(this.generation, false);
    // The new stream exists (consume() makes it synchronously) before the old one closes,
    // so the client never sees the topics untracked and rejoins.
    void old?.close().catch(() => undefined);
  }

  private emitJoin(assignments: PlatformaticAssignment[]): void {
    const memberAssignment: Record<string, number[]> = {};
    for (const { topic, partitions } of assignments) memberAssignment[topic] = [...partitions];
    this.emit('consumer.group_join', { payload: { memberAssignment } });
  }

  /**
   * Opens a stream for `generation`. The first consume() joins the group, whose join
   * event starts the next generation; with `handOver`, when no join happened meanwhile
   * (a restart, or a client that had joined already) the current assignment is handed
   * to the source here (a stream opened by a join was handed over by that join). Either way before the `data` listener starts the stream flowing, so no record
   * reaches the source before its partition's worker exists.
   */
  private async open(generation: number, handOver: boolean): Promise<void> {
    this.opening = true;
    let stream: PlatformaticStreamLike;
    try {
      stream = await this.client.consume({
        ...this.options.fetch,
        topics: this.topics,
        mode: 'committed',
        fallbackMode: this.fromBeginning ? 'earliest' : 'latest',
        autocommit: false,
      });
    } catch (error) {
      if (generation === 0) throw error; // run() reports it
      this.opening = false;
      this.crash(error instanceof Error ? error : new Error(String(error)), true);
      return;
    } finally {
      this.opening = false;
    }
    if (!this.running || (generation !== this.generation && this.stream !== undefined)) {
      void stream.close().catch(() => undefined);
      return;
    }
    if (handOver && generation === this.generation) this.emitJoin(this.client.assignments ?? []);
    const current = this.generation;
    this.stream = stream;
    stream.on('data', (message) => {
      if (current !== this.generation) return;
      if (!this.feed(message.topic, message.partition).push(message)) return;
      if (++this.queued >= this.maxQueued && !this.streamPaused) {
        this.streamPaused = true;
        stream.pause();
      }
      if (!this.flushQueued) {
        this.flushQueued = true;
        queueMicrotask(() => this.flush());
      }
    });
    stream.on('error', (error) => {
      if (current === this.generation) this.crash(error, true);
    });
  }

  /** Records of one fetch arrive synchronously: hand each partition's over as one batch. */
  private flush(): void {
    this.flushQueued = false;
    for (const feed of this.feeds.values()) feed.deliver();
  }

  /**
   * The stream failed: the source revokes every partition (kafkajs's crash), then a
   * fresh stream starts from the committed offsets as a new generation. A failed
   * rejoin (`restart` false) is final.
   */
  private crash(error: Error, restart: boolean): void {
    if (!this.running) return;
    this.nextGeneration();
    const old = this.stream;
    this.stream = undefined;
    void old?.close().catch(() => undefined);
    this.emit('consumer.crash', { payload: { error, restart } });
    if (!restart) return;
    const generation = this.generation;
    setTimeout(() => {
      if (!this.isCurrent(generation)) return;
      void this.open(generation, true);
    }, RESTART_DELAY_MS).unref?.();
  }
}
