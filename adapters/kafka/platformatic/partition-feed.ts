import type { EachBatchPayloadLike, KafkaMessageLike } from '../client.js';
import type { PlatformaticMessageLike } from './types.js';

/** What a feed needs of the consumer that owns it. */
export interface FeedOwner {
  /** Hands one batch to the source (kafkajs `eachBatch`). */
  eachBatch(payload: EachBatchPayloadLike): Promise<void>;
  /** Whether the feed's stream generation is still the current one and running. */
  isCurrent(generation: number): boolean;
  /** The partition's log end offset as last listed (listed once per generation before any batch). */
  endOffset(topic: string, partition: number): Promise<bigint | undefined>;
  /** Records of `generation` were taken out of a queue (the owner may resume fetching). */
  drained(count: number, generation: number): void;
  /** `eachBatch` failed (only a rebalance makes the source's throw). */
  failed(error: unknown): void;
}

/**
 * One partition's records between the `MessagesStream` and the source: queued in
 * offset order and handed over one batch at a time, the next only once the source's
 * `eachBatch` returned (as kafkajs does per partition). A `MessagesStream` cannot pause
 * or seek one partition, so both happen here: a paused partition's records wait in the
 * queue, and a seek drops the records below its offset.
 */
export class PartitionFeed {
  private queue: PlatformaticMessageLike[] = [];
  private paused = false;
  private delivering = false;
  /** Records below this offset are known duplicates the source asked to skip (seek). */
  private floor: bigint | undefined;
  private seeks = 0;

  constructor(
    readonly topic: string,
    readonly partition: number,
    private readonly generation: number,
    private readonly owner: FeedOwner,
  ) {}

  /** Records waiting in the queue. */
  get queued(): number {
    return this.queue.length;
  }

  /** Takes a record from the stream; returns whether it was queued. */
  push(message: PlatformaticMessageLike): boolean {
    if (this.floor !== undefined && message.offset < this.floor) return false;
    this.queue.push(message);
    return true;
  }

  /** Stops handing batches over (the records keep arriving into the queue). */
  pause(): void {
    this.paused = true;
  }

  /** Hands batches over again, starting with the queued ones. */
  resume(): void {
    this.paused = false;
    this.deliver();
  }

  /**
   * Skips to `offset`: queued records below it are dropped now and later ones on
   * arrival. Returns whether nothing at or past it is queued (the stream's fetch
   * position may then move there without refetching a queued record).
   */
  seek(offset: bigint): boolean {
    this.floor = offset;
    this.seeks++;
    const before = this.queue.length;
    this.queue = this.queue.filter((m) => m.offset >= offset);
    if (before !== this.queue.length)
      this.owner.drained(before - this.queue.length, this.generation);
    return this.queue.length === 0;
  }

  /** Hands the queued records over as one batch unless paused or one is in progress. */
  deliver(): void {
    if (this.paused || this.delivering || this.queue.length === 0) return;
    if (!this.owner.isCurrent(this.generation)) return;
    const messages = this.queue;
    this.queue = [];
    this.owner.drained(messages.length, this.generation);
    this.delivering = true;
    void this.handOver(messages).finally(() => {
      this.delivering = false;
      this.deliver();
    });
  }

  private async handOver(messages: PlatformaticMessageLike[]): Promise<void> {
    const { topic, partition, generation, owner } = this;
    const seeks = this.seeks;
    const last = messages[messages.length - 1] as PlatformaticMessageLike;
    const listed = await owner.endOffset(topic, partition);
    // Without a listed log end the source skips its stored-offset check rather than guess.
    // The listed one may predate these records: never report one below them.
    const end =
      listed === undefined ? undefined : listed <= last.offset ? last.offset + 1n : listed;
    const payload: EachBatchPayloadLike = {
      batch: {
        topic,
        partition,
        messages: messages.map(toKafkaMessage),
        ...(end === undefined ? {} : { highWatermark: end.toString() }),
      },
      // The stream tracks its own fetch position: nothing to resolve.
      resolveOffset: () => undefined,
      // The consumer heartbeats on its own timer; a new generation ends this batch's wait.
      heartbeat: () =>
        owner.isCurrent(generation)
          ? Promise.resolve()
          : Promise.reject(new Error('The group rebalanced: the batch is outdated')),
      isRunning: () => owner.isCurrent(generation),
      isStale: () => this.seeks !== seeks,
    };
    try {
      if (!owner.isCurrent(generation)) return;
      await owner.eachBatch(payload);
    } catch (error) {
      owner.failed(error);
    }
  }
}

/** A platformatic record in kafkajs's shape (repeated header names become an array). */
function toKafkaMessage(message: PlatformaticMessageLike): KafkaMessageLike {
  let headers: Record<string, Buffer | Buffer[]> | undefined;
  for (const [name, value] of message.headerEntries) {
    headers ??= {};
    const key = name.toString();
    const seen = headers[key];
    if (seen === undefined) headers[key] = value;
    else if (Array.isArray(seen)) seen.push(value);
    else headers[key] = [seen, value];
  }
  return {
    key: message.key ?? null,
    value: message.value ?? null,
    offset: message.offset.toString(),
    timestamp: message.timestamp.toString(),
    headers: headers ?? {},
  };
}
