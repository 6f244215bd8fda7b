import type { EffectivelyOnceError } from '../../src/errors.js';
import { PartitionRevokedError } from './errors.js';
import { sleep } from '../../src/sleep.js';
import type { SqlRunner } from '../../src/data-layer.js';
import type { Delivery, DeliveryOutcome, SourceContext } from '../../src/types.js';
import type { DeadLetterPublisher } from './dead-letter.js';
import { decodeRecord } from './decode.js';
import { HandoverTurns } from './handover-turns.js';
import { HeldOffsets } from './held-offsets.js';
import { orderingKeyOf, partitionOrderingKey, recordKey } from './keys.js';
import type { Limiter } from './limiter.js';
import { OffsetTracker } from './offset-tracker.js';
import { RecordQueue } from './record-queue.js';
import type { KafkaSourceConfig } from './options.js';
import type { OffsetMark, PostgresOffsetStore } from './postgres-offsets.js';
import type { KafkaRecord } from './record.js';
import {
  RecordDelivery,
  RELEASED,
  type QueuedRecord,
  type RecordOwner,
  type Settlement,
} from './record-delivery.js';

/** What a partition worker needs from its source. */
export interface PartitionWorkerDeps<T> {
  readonly topic: string;
  readonly partition: number;
  readonly ctx: SourceContext<T>;
  readonly config: KafkaSourceConfig<T>;
  /** `partitionConcurrency` slots shared by all workers. */
  readonly slots: Limiter;
  /** Pauses / resumes fetching this partition. */
  readonly flow: { pause(): void; resume(): void };
  readonly deadLetters: DeadLetterPublisher;
  /** Set with `offsets: 'postgres'`. */
  readonly offsetStore: PostgresOffsetStore | undefined;
  /** A record finished: offsets may be committable. */
  readonly onProgress: () => void;
}

/**
 * Handles one assigned partition for one assignment (a rebalance replaces it): takes
 * fetched records in offset order, delivers them to the runner (one at a time, or up
 * to `keyConcurrency` of distinct Kafka keys), retries in place with the partition
 * paused, and tracks which offsets are finished so only a contiguous prefix commits.
 */
export class PartitionWorker<T> implements RecordOwner {
  readonly tracker = new OffsetTracker();
  /** With `offsets: 'postgres'`: the stored next offset; records below it are known duplicates. */
  storedOffset: bigint | undefined;
  /**
   * With `offsets: 'postgres'`: a record below the stored offset as it was applied. Until
   * the record found at its offset is checked against it, nothing below the stored
   * offset is skipped (a recreated topic has other records there).
   */
  storedMark: OffsetMark | undefined;
  /** Whether the mark was checked (or cannot be: the log no longer reaches its offset). */
  markChecked = false;
  /** The high watermark of the last fetched batch (for the records' lag in telemetry). */
  highWatermark: bigint | undefined;
  /** Resolves once the worker may take records (stored offset loaded, or revoked). */
  ready: Promise<void> = Promise.resolve();

  private state: 'active' | 'stopping' | 'revoked' = 'active';
  /** Aborted on revocation: the deliveries' `signal`. */
  private readonly lost = new AbortController();
  /** Aborted on revocation or stop: ends backoff sleeps and slot waits. */
  private readonly halt = new AbortController();
  /** Records waiting to start, FIFO per ordering key (keys in order of arrival). */
  private readonly waiting = new Map<string, RecordQueue<QueuedRecord<T>>>();
  private queued = 0;
  /** Records in flight (or backing off) per ordering key. */
  private readonly inFlight = new Map<string, number>();
  private inFlightRecords = 0;
  /** Records being retried in place: nothing after them (of their key) may start. */
  private readonly held = new HeldOffsets();
  /** With `pipeline` > 1: records of a key are handed to the runner one after the other. */
  private readonly turns = new HandoverTurns();
  /** Settles once nothing is in flight (made by {@link stop}). */
  private idle: Promise<void> | undefined;
  private whenIdle: (() => void) | undefined;
  /** The ordering key of every record without key concurrency (one string, hashed once). */
  private readonly partitionKey: string;
  private pumpScheduled = false;
  private backlogFull = false;
  private retrying = 0;
  private paused = false;
  private stalled = false;
  private slotUsers = 0;
  private slotHeld = false;
  private slotWait: Promise<boolean> | undefined;
  /** The last transaction's deliveries seen by {@link storeOffset}, and the first of this partition's. */
  private hookedBatch:
    { together: ReadonlyArray<Delivery<unknown>>; first: RecordDelivery<unknown> } | undefined;

  constructor(private readonly deps: PartitionWorkerDeps<T>) {
    this.partitionKey = partitionOrderingKey(deps.topic, deps.partition);
  }

  get topic(): string {
    return this.deps.topic;
  }

  get partition(): number {
    return this.deps.partition;
  }

  /** {@link RecordOwner}: the consumer group. */
  get groupId(): string {
    return this.deps.config.groupId;
  }

  /** Whether fetched records are still wanted. */
  get accepting(): boolean {
    return this.state === 'active' && !this.stalled;
  }

  /**
   * The partition cannot be consumed safely (its stored offset is beyond the log end):
   * pause it and take nothing more for this assignment. True the first time.
   */
  stall(): boolean {
    if (this.stalled || this.state !== 'active') return false;
    this.stalled = true;
    if (!this.paused) {
      this.paused = true;
      this.deps.flow.pause();
    }
    return true;
  }

  /** Whether the partition was taken away; its acks no longer count. */
  get revoked(): boolean {
    return this.state === 'revoked';
  }

  /** Whether fetching is paused for backpressure or a retry. */
  get isPaused(): boolean {
    return this.paused;
  }

  /** Records queued or in flight. */
  get busy(): number {
    return this.queued + this.inFlightRecords;
  }

  /**
   * Takes a fetched record (`offset`: its offset, parsed). Returns false if the worker no
   * longer accepts records or already holds this offset (a refetch after a seek or rebalance).
   */
  enqueue(record: KafkaRecord, offset: bigint): boolean {
    if (this.state !== 'active') return false;
    if (!this.tracker.add(offset)) return false;
    const orderingKey =
      this.deps.config.keyConcurrency > 1 ? orderingKeyOf(record, true) : this.partitionKey;
    const item: QueuedRecord<T> = { record, offset, orderingKey, attempt: 1 };
    let list = this.waiting.get(orderingKey);
    if (list === undefined) this.waiting.set(orderingKey, (list = new RecordQueue()));
    list.push(item);
    this.queued++;
    if (!this.backlogFull && this.tracker.pending >= this.deps.config.maxPendingPerPartition) {
      this.backlogFull = true;
      this.updateFlow();
    }
    if (!this.pumpScheduled) {
      this.pumpScheduled = true;
      queueMicrotask(() => {
        this.pumpScheduled = false;
        this.pump();
      });
    }
    return true;
  }

  /**
   * A fetched record below the stored offset (`offsets: 'postgres'`): applied before, so
   * never delivered; finished at once so the Kafka commit moves past it. Fetched records
   * come in offset order, so every skipped one is below every record taken. True when
   * the commit point may have moved.
   */
  skip(offset: bigint): boolean {
    if (this.state !== 'active' || !this.tracker.add(offset)) return false;
    this.tracker.finish(offset);
    return true;
  }

  /**
   * The partition was revoked (or the consumer crashed out of the group): abort the
   * deliveries' signals, drop what is queued, and never count this worker's acks.
   */
  revoke(): void {
    if (this.state === 'revoked') return;
    const wasPaused = this.paused;
    this.state = 'revoked';
    this.dropWaiting();
    const reason = new PartitionRevokedError(this.topic, this.partition);
    this.halt.abort(reason);
    this.lost.abort(reason);
    // kafkajs keeps a partition's pause across rebalances: clear it for the next owner of it here.
    if (wasPaused) this.deps.flow.resume();
    this.paused = false;
  }

  /** Shutdown: start nothing more, end backoffs, and wait for deliveries in flight to settle. */
  async stop(): Promise<void> {
    if (this.state === 'active') {
      this.state = 'stopping';
      this.dropWaiting();
      this.halt.abort();
    }
    if (this.inFlightRecords > 0)
      await (this.idle ??= new Promise<void>((resolve) => (this.whenIdle = resolve)));
  }

  /**
   * Starts waiting records while fewer than `keyConcurrency` are in flight, taking the
   * head of each ordering key that has nothing in flight, oldest key first. Costs
   * O(keys in flight) per call, however long the backlog.
   */
  private pump(): void {
    if (this.state !== 'active') return;
    const { keyConcurrency: limit, pipeline } = this.deps.config;
    for (const [orderingKey, list] of this.waiting) {
      let running = this.inFlight.get(orderingKey) ?? 0;
      if (running === 0 && this.inFlight.size >= limit) {
        if (pipeline === 1) return;
        continue;
      }
      if (this.held.has(orderingKey)) continue;
      while (running < pipeline && list.length > 0) {
        this.queued--;
        this.start(list.shift());
        running++;
      }
      if (list.length === 0) this.waiting.delete(orderingKey);
    }
  }

  /** Puts a record taken back from the runner in front of the later ones of its key. */
  private requeue(item: QueuedRecord<T>): void {
    this.held.release(item);
    let list = this.waiting.get(item.orderingKey);
    if (list === undefined) this.waiting.set(item.orderingKey, (list = new RecordQueue()));
    list.insertByOffset(item);
    this.queued++;
  }

  /** A record goes back for a retry: the records of its key handed over after it must wait. */
  hold(item: QueuedRecord<T>): void {
    this.held.hold(item);
  }

  /**
   * A record going back for a retry while a lower offset of its key is being retried
   * (one failure sent several back, e.g. a batch failing as a whole) is taken back into
   * the queue, behind that one: backing off on its own delay, it could come back first.
   */
  private takeBackBehindLower(item: QueuedRecord<T>): boolean {
    if (!this.held.behindLower(item)) return false;
    this.requeue(item);
    return true;
  }

  private dropWaiting(): void {
    this.waiting.clear();
    this.queued = 0;
  }

  private start(item: QueuedRecord<T>): void {
    const key = item.orderingKey;
    this.inFlight.set(key, (this.inFlight.get(key) ?? 0) + 1);
    this.inFlightRecords++;
    void this.process(item);
  }

  /** The record started by {@link start} ended: free its place and start what may follow. */
  private ended(key: string): void {
    const left = (this.inFlight.get(key) ?? 1) - 1;
    if (left === 0) this.inFlight.delete(key);
    else this.inFlight.set(key, left);
    this.inFlightRecords--;
    if (this.inFlightRecords === 0 && this.whenIdle !== undefined) {
      this.whenIdle();
      this.whenIdle = undefined;
      this.idle = undefined;
    }
    this.pump();
  }

  /**
   * Delivers one record until it is finished, released or the worker ends. Never
   * rejects. Its own end does the bookkeeping (no `.finally` and no set of promises per
   * record: at tens of thousands of records a second each promise shows).
   */
  private async process(item: QueuedRecord<T>): Promise<void> {
    try {
      while (this.state === 'active') {
        const handedOver = await this.handOver(item);
        if (handedOver === undefined) return;
        const [delivery, pending] = handedOver;
        let outcome: DeliveryOutcome;
        try {
          outcome = await pending;
        } finally {
          this.leaveSlot();
        }
        const settlement = this.settlementOf(delivery, outcome);
        if (settlement.kind === 'finished') {
          this.held.release(item);
          this.finish(item);
          return;
        }
        if (this.state !== 'active') return;
        if (settlement.kind === 'retry') {
          // Only the record's own failures count towards maxAttempts, not a busy claim or an outage.
          if (settlement.attemptSpent) item.attempt++;
          this.hold(item);
          if (this.takeBackBehindLower(item)) return;
          await this.backOff(settlement.delayMs);
          // A lower record of the key may have gone back while this one waited.
          if (this.state === 'active' && this.takeBackBehindLower(item)) return;
        } else if (this.deps.config.pipeline > 1) {
          // Taken back so as not to overtake an earlier record being retried: it waits in
          // the queue, in offset order, until that one is done.
          this.requeue(item);
          return;
        } else {
          // Released while still active (not a shutdown): deliver it again, without spending an attempt.
          await this.backOff(this.deps.config.redeliveryDelayMs);
        }
      }
    } catch (error) {
      this.deps.ctx.logger.error(
        { err: error, topic: this.topic, partition: this.partition, offset: item.record.offset },
        'effectively-once: kafka partition worker failed',
      );
    } finally {
      this.ended(item.orderingKey);
    }
  }

  /**
   * Hands the record to the runner once its key's turn came (with `pipeline` > 1), a
   * slot was entered and the consumer has room. Returns the delivery and its outcome
   * (the caller leaves the slot when it settles), or undefined when the worker ended or
   * the record was taken back behind a lower one being retried (nothing to leave then).
   */
  private async handOver(
    item: QueuedRecord<T>,
  ): Promise<[RecordDelivery<T>, Promise<DeliveryOutcome>] | undefined> {
    const ordered = this.deps.config.pipeline > 1;
    if (ordered) {
      const turn = this.turns.take(item.orderingKey);
      if (turn !== undefined) await turn;
    }
    try {
      if (this.state !== 'active') return undefined;
      // A lower record of the key went back for a retry while this one waited its turn.
      if (ordered && this.takeBackBehindLower(item)) return undefined;
      // The slot is usually held already (another record of this partition is in flight).
      if (this.slotHeld) this.slotUsers++;
      else if (!(await this.enterSlot())) return undefined;
      try {
        const { ctx } = this.deps;
        if (ctx.freeCapacity() <= 0) await ctx.waitForCapacity();
        if (this.state !== 'active' || (ordered && this.takeBackBehindLower(item))) {
          this.leaveSlot();
          return undefined;
        }
        const delivery = this.delivery(item);
        return [delivery, ctx.deliver(delivery)];
      } catch (error) {
        this.leaveSlot();
        throw error;
      }
    } finally {
      if (ordered) this.turns.pass(item.orderingKey);
    }
  }

  /** How the delivery ended for the partition: the source's own answer first. */
  private settlementOf(delivery: RecordDelivery<T>, outcome: DeliveryOutcome): Settlement {
    if (delivery.settlement !== undefined) return delivery.settlement;
    return outcome === 'released'
      ? RELEASED
      : { kind: 'retry', delayMs: this.deps.config.redeliveryDelayMs, attemptSpent: true };
  }

  private delivery(item: QueuedRecord<T>): RecordDelivery<T> {
    const { config, offsetStore: store } = this.deps;
    const record = item.record;
    item.decoded ??= decodeRecord(record, config.parse);
    item.key ??= recordKey(record, config.key, config.idempotencyHeader);
    const delivery = new RecordDelivery<T>(this, item, item.decoded, this.lost.signal);
    if (store !== undefined)
      delivery.inTransaction = (tx, together) => this.storeOffset(store, tx, delivery, together);
    return delivery;
  }

  /**
   * `offsets: 'postgres'`: stores the partition's next offset in the effect's
   * transaction. Every record of this partition committing in it (a batch holds many)
   * counts as finished, so the first of them stores the offset past them all, once.
   */
  private async storeOffset(
    store: PostgresOffsetStore,
    tx: SqlRunner,
    delivery: RecordDelivery<T>,
    together: ReadonlyArray<Delivery<unknown>>,
  ): Promise<void> {
    // Every delivery's hook gets the same `together`: only the first of this partition's
    // reads it through (else a batch of n costs n^2); the others find it remembered. A
    // transaction run again with the same list runs its first hook again, so it stores again.
    const seen = this.hookedBatch;
    if (seen !== undefined && seen.together === together && seen.first !== delivery) return;
    const mine: Array<RecordDelivery<unknown>> = [];
    for (const d of together) {
      if (!(d instanceof RecordDelivery) || d.owner !== this) continue;
      mine.push(d);
    }
    if (mine.length > 0) this.hookedBatch = { together, first: mine[0] as RecordDelivery<unknown> };
    if (mine.length > 0 && mine[0] !== delivery) return;
    if (mine.length === 0) mine.push(delivery);
    const next = this.tracker.storableAfter(mine.map((d) => d.offset));
    if (next === undefined) return;
    // The mark: the highest record of the transaction below the offset stored.
    let mark: OffsetMark | undefined;
    for (const d of mine) {
      if (d.offset >= next || (mark !== undefined && d.offset <= mark.offset)) continue;
      const timestamp = timestampOf(d.raw.timestamp);
      if (timestamp !== undefined) mark = { offset: d.offset, timestamp };
    }
    await store.save(tx, this.topic, this.partition, next, mark);
  }

  /** {@link RecordOwner}: publishes a record to the dead-letter topic. */
  publishDeadLetter(
    record: KafkaRecord,
    reason: EffectivelyOnceError,
    attempt: number,
  ): Promise<void> {
    return this.deps.deadLetters.publish(record, reason, attempt);
  }

  get redeliveryDelayMs(): number {
    return this.deps.config.redeliveryDelayMs;
  }

  private finish(item: QueuedRecord<T>): void {
    if (this.state === 'revoked') return;
    this.tracker.finish(item.offset);
    if (this.backlogFull && this.tracker.pending <= this.deps.config.maxPendingPerPartition / 2) {
      this.backlogFull = false;
      this.updateFlow();
    }
    this.deps.onProgress();
  }

  /** Retry in place: the partition stays paused while any of its records backs off. */
  private async backOff(delayMs: number): Promise<void> {
    this.retrying++;
    this.updateFlow();
    try {
      await sleep(delayMs, this.halt.signal);
    } finally {
      this.retrying--;
      this.updateFlow();
    }
  }

  private updateFlow(): void {
    if (this.state !== 'active' || this.stalled) return;
    const pause = this.backlogFull || this.retrying > 0;
    if (pause === this.paused) return;
    this.paused = pause;
    if (pause) this.deps.flow.pause();
    else this.deps.flow.resume();
  }

  /** One `partitionConcurrency` slot covers all of this partition's deliveries in flight. */
  private async enterSlot(): Promise<boolean> {
    this.slotUsers++;
    if (this.slotHeld) return true;
    this.slotWait ??= this.deps.slots.acquire(this.halt.signal).then((granted) => {
      this.slotWait = undefined;
      if (granted) this.slotHeld = true;
      return granted;
    });
    const granted = await this.slotWait;
    if (!granted) this.slotUsers--;
    return granted;
  }

  private leaveSlot(): void {
    this.slotUsers--;
    if (this.slotUsers === 0 && this.slotHeld) {
      this.slotHeld = false;
      this.deps.slots.release();
    }
  }
}

/** A record's timestamp (milliseconds as a decimal string) as a bigint; undefined if it is not one. */
export function timestampOf(text: string): bigint | undefined {
  return /^-?\d+$/.test(text) ? BigInt(text) : undefined;
}
