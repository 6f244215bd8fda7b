import { BrokerError, DatabaseError, EffectivelyOnceError, StateError } from '../../src/errors.js';
import { StoredOffsetAheadError } from './errors.js';
import type { Source, SourceContext } from '../../src/types.js';
import type {
  EachBatchPayloadLike,
  KafkaConsumerLike,
  KafkaCrashEvent,
  KafkaGroupJoinEvent,
  KafkaProducerLike,
  KafkaTopicPartitions,
} from './client.js';
import { OffsetCommitter } from './committer.js';
import { heartbeatWhile } from './heartbeat.js';
import { DeadLetterPublisher } from './dead-letter.js';
import { Limiter } from './limiter.js';
import { resolveKafkaOptions, type KafkaSourceConfig, type KafkaSourceOptions } from './options.js';
import { retryDelay } from '../../src/backoff.js';
import { settlesBefore } from '../../src/deadline.js';
import { sleep } from '../../src/sleep.js';
import { PartitionWorker, timestampOf } from './partition-worker.js';
import { PostgresOffsetStore } from './postgres-offsets.js';
import { toKafkaRecord } from './record.js';

/** Retries of the stored-offset load: 1-2 s, doubling to at most 10-20 s (the batch heartbeats meanwhile). */
const STORED_OFFSETS_RETRY = { initialMs: 2000, maxMs: 20_000 };

/** What `run` races the client's start against: the stop signal. */
const STOPPED = Symbol('stopped');

/** kafkajs workers used for `eachBatch` when `partitionConcurrency` is unlimited (each call is short). */
const DEFAULT_BATCH_CONCURRENCY = 16;

/** The state of one assigned partition, for monitoring and tests. */
export interface KafkaPartitionState {
  /** The topic. */
  topic: string;
  /** The partition. */
  partition: number;
  /** Records received and not yet committable. */
  pending: number;
  /** Records queued or being delivered. */
  busy: number;
  /** Next offset whose commit succeeded, as a decimal string. */
  committed: string | undefined;
  /** Whether fetching is paused (backpressure or a retry backing off). */
  paused: boolean;
}

/**
 * A `Source` over a Kafka consumer group (see {@link kafkaSource}). It runs the
 * consumer with `eachBatch`, no auto-commit and no auto-resolve: batches are handed to
 * one `PartitionWorker` per assigned partition and `eachBatch` returns at once,
 * so a slow or retrying partition never holds the fetch loop (and its heartbeats)
 * hostage; backpressure pauses the partition instead.
 *
 * Rebalances: kafkajs uses the eager protocol, where every member gives up every
 * partition and restarts from the committed offsets. On each `GROUP_JOIN` all workers
 * are revoked (their deliveries' signals abort, their acks stop counting, they never
 * commit again) and new ones are made for the new assignment.
 */
export class KafkaSource<T = unknown> implements Source<T> {
  /** `kafka:`, the group id and the topics. */
  readonly description: string;
  private readonly config: KafkaSourceConfig<T>;
  private readonly consumer: KafkaConsumerLike;
  private readonly ownsConsumer: boolean;
  private readonly deadLetters: DeadLetterPublisher;
  private readonly offsetStore: PostgresOffsetStore | undefined;
  private readonly slots: Limiter;
  private readonly workers = new Map<string, PartitionWorker<T>>();
  private readonly listeners: Array<() => void> = [];
  private state: 'new' | 'running' | 'draining' | 'closed' = 'new';
  private ctx: SourceContext<T> | undefined;
  private committer: OffsetCommitter | undefined;
  private assignmentAbort = new AbortController();
  private fatal: EffectivelyOnceError | undefined;
  private wake: (() => void) | undefined;
  /** The client's connect, subscribe and run (its join): close() leaves only once it ended. */
  private clientStart: Promise<BrokerError | undefined> | undefined;

  constructor(options: KafkaSourceOptions<T>) {
    const config = resolveKafkaOptions(options);
    this.config = config;
    this.description = `kafka:${config.groupId}:${config.topics.join(',')}`;
    this.ownsConsumer = config.consumer === undefined;
    this.consumer =
      config.consumer ??
      (config.kafka as NonNullable<typeof config.kafka>).consumer({
        ...config.consumerConfig,
        groupId: config.groupId,
      });
    let producer: KafkaProducerLike | undefined = config.producer;
    const kafka = config.kafka;
    this.deadLetters = new DeadLetterPublisher(
      () => (producer ??= (kafka as NonNullable<typeof kafka>).producer(config.producerConfig)),
      config.producer === undefined,
      config.deadLetterTopic,
    );
    this.offsetStore =
      config.offsets === 'postgres' && config.pool !== undefined
        ? new PostgresOffsetStore(config.pool, config.groupId, {
            schema: config.offsetsSchema,
            table: config.offsetsTable,
          })
        : undefined;
    this.slots = new Limiter(config.partitionConcurrency);
  }

  /** The partitions currently assigned to this member. */
  partitions(): KafkaPartitionState[] {
    return [...this.workers.values()].map((w) => ({
      topic: w.topic,
      partition: w.partition,
      pending: w.tracker.pending,
      busy: w.busy,
      committed: w.tracker.committed?.toString(),
      paused: w.isPaused,
    }));
  }

  /** Receives until `ctx.signal` aborts (see `Source.run`). */
  async run(ctx: SourceContext<T>): Promise<void> {
    if (this.state !== 'new') {
      throw new StateError(`${this.description} can run only once`);
    }
    this.state = 'running';
    this.ctx = ctx;
    this.committer = new OffsetCommitter(
      this.consumer,
      this.config.commitIntervalMs,
      () => this.workers.values(),
      (error) => ctx.reportError(error),
      ctx.logger,
    );
    const stopped = new Promise<void>((resolve) => {
      this.wake = resolve;
      if (ctx.signal.aborted) resolve();
      else ctx.signal.addEventListener('abort', () => resolve(), { once: true });
    });
    this.listen();
    // kafkajs's run() resolves only once the member joined the group, which lasts as long
    // as a crashed member's session: a stop meanwhile must not wait for it. The start goes
    // on in the background then; a join it completes gets no workers (the source is no
    // longer running) and close() disconnects the client.
    const started = (this.clientStart = this.startClient());
    const first = await Promise.race([started, stopped.then(() => STOPPED)]);
    if (first instanceof BrokerError) {
      this.state = 'draining';
      throw first;
    }
    if (first === STOPPED)
      void started.then((failure) => {
        if (failure !== undefined)
          ctx.logger.debug({ err: failure }, 'effectively-once: kafka start ended after stop');
      });
    await stopped;
    await this.drain();
    if (this.fatal !== undefined) throw this.fatal;
  }

  /** Connects, subscribes and runs the client; resolves with the failure, if any (never rejects). */
  private async startClient(): Promise<BrokerError | undefined> {
    const { topics, fromBeginning, partitionConcurrency } = this.config;
    try {
      await this.consumer.connect();
      await this.consumer.subscribe({ topics, fromBeginning });
      await this.consumer.run({
        eachBatch: (payload) => this.eachBatch(payload),
        eachBatchAutoResolve: false,
        autoCommit: false,
        partitionsConsumedConcurrently: Number.isFinite(partitionConcurrency)
          ? partitionConcurrency
          : DEFAULT_BATCH_CONCURRENCY,
      });
      return undefined;
    } catch (cause) {
      return new BrokerError('start consumer', cause, {
        retryable: false,
        details: { groupId: this.config.groupId, topics },
      });
    }
  }

  /**
   * Flushes pending acks and releases what the source created (see `Source.close`). At
   * `signal`'s abort (the stop deadline) it sends no more commits and stops waiting: the
   * client's disconnect (or stop) goes on in the background.
   */
  async close(options: { readonly signal?: AbortSignal } = {}): Promise<void> {
    if (this.state === 'closed') return;
    const deadline = options.signal ?? new AbortController().signal;
    const started = this.state !== 'new';
    this.state = 'closed';
    const onDeadline = () => this.committer?.suspend();
    deadline.addEventListener('abort', onDeadline, { once: true });
    try {
      if (this.committer !== undefined) {
        this.committer.close();
        if (deadline.aborted) this.committer.suspend();
        // Finished work of the current assignment commits while the member is still in the group.
        else if (this.fatal === undefined) await settlesBefore(this.committer.flush(), deadline);
      }
      for (const remove of this.listeners.splice(0)) remove();
      this.revokeAll();
      let failure: unknown;
      const leaving = (async () => {
        // Disconnecting kafkajs in the middle of its join fails the join, and kafkajs then
        // restarts the consumer into the group (a member nobody stops): leave after the join.
        await this.clientStart;
        if (this.ownsConsumer) await this.consumer.disconnect();
        else if (started) await this.consumer.stop();
      })().catch((cause: unknown) => {
        failure = cause;
      });
      const left = await settlesBefore(leaving, deadline);
      if (!left) {
        this.ctx?.logger.warn(
          { groupId: this.config.groupId },
          'effectively-once: the kafka client was still leaving at the stop deadline; it goes on in the background',
        );
        void leaving.then(() => {
          if (failure !== undefined)
            this.ctx?.logger.warn(
              { err: failure },
              'effectively-once: closing the kafka consumer failed',
            );
        });
      }
      const producerClosed = this.deadLetters.close().catch((err: unknown) => {
        this.ctx?.logger.warn({ err }, 'effectively-once: closing the dead-letter producer failed');
      });
      await settlesBefore(producerClosed, deadline);
      if (left && failure !== undefined) {
        throw new BrokerError('close consumer', failure, {
          details: { groupId: this.config.groupId },
        });
      }
    } finally {
      deadline.removeEventListener('abort', onDeadline);
    }
  }

  private listen(): void {
    const add = (result: unknown) => {
      if (typeof result === 'function') this.listeners.push(result as () => void);
    };
    add(this.consumer.on('consumer.group_join', (event) => this.onGroupJoin(event)));
    add(this.consumer.on('consumer.rebalancing', () => this.onRebalancing()));
    add(this.consumer.on('consumer.crash', (event) => this.onCrash(event)));
  }

  /**
   * Runs synchronously inside kafkajs's join, before the first fetch of the new
   * generation: the old workers are revoked before any commit can use that generation.
   */
  private onGroupJoin(event: KafkaGroupJoinEvent): void {
    const ctx = this.ctx;
    if (ctx === undefined || this.state === 'closed') return;
    this.revokeAll();
    this.committer?.resume();
    const assigned: KafkaTopicPartitions[] = Object.entries(event.payload.memberAssignment).map(
      ([topic, partitions]) => ({
        topic,
        partitions: [...partitions],
      }),
    );
    if (this.state !== 'running') {
      this.pause(assigned);
      return;
    }
    const fresh: Array<PartitionWorker<T>> = [];
    for (const { topic, partitions } of assigned) {
      for (const partition of partitions) {
        const worker = this.createWorker(ctx, topic, partition);
        this.workers.set(tpKey(topic, partition), worker);
        fresh.push(worker);
      }
    }
    if (this.offsetStore !== undefined && fresh.length > 0)
      this.loadStoredOffsets(ctx, this.offsetStore, fresh);
    ctx.logger.info(
      { groupId: this.config.groupId, assigned },
      'effectively-once: kafka partitions assigned',
    );
  }

  /**
   * kafkajs saw a rebalance and is about to rejoin: commit what is finished now, while
   * the current generation is still accepted, then hold commits until the new
   * assignment (a request sent later could otherwise carry the next generation for a
   * partition this member is about to lose).
   */
  private onRebalancing(): void {
    if (this.committer === undefined) return;
    void this.committer.flush();
    this.committer.suspend();
  }

  private onCrash(event: KafkaCrashEvent): void {
    // kafkajs disconnects on a crash: the member left the group and lost its partitions.
    this.revokeAll();
    const { error, restart } = event.payload;
    const details = { groupId: this.config.groupId, restart };
    if (restart) {
      this.ctx?.reportError(
        new BrokerError('consume (kafkajs restarts the consumer)', error, { details }),
      );
      return;
    }
    this.fatal = new BrokerError('consume', error, { retryable: false, details });
    this.wake?.();
  }

  private revokeAll(): void {
    this.assignmentAbort.abort();
    this.assignmentAbort = new AbortController();
    for (const worker of this.workers.values()) worker.revoke();
    this.workers.clear();
  }

  private createWorker(
    ctx: SourceContext<T>,
    topic: string,
    partition: number,
  ): PartitionWorker<T> {
    const one = [{ topic, partitions: [partition] }];
    return new PartitionWorker<T>({
      topic,
      partition,
      ctx,
      config: this.config,
      slots: this.slots,
      flow: { pause: () => this.pause(one), resume: () => this.resume(one) },
      deadLetters: this.deadLetters,
      offsetStore: this.offsetStore,
      onProgress: () => this.committer?.schedule(),
    });
  }

  private loadStoredOffsets(
    ctx: SourceContext<T>,
    store: PostgresOffsetStore,
    workers: Array<PartitionWorker<T>>,
  ): void {
    const signal = this.assignmentAbort.signal;
    const topics = [...new Set(workers.map((w) => w.topic))];
    const loaded = (async () => {
      for (let attempt = 1; !signal.aborted; attempt++) {
        try {
          const stored = await store.load(topics);
          for (const w of workers) {
            const row = stored.get(tpKey(w.topic, w.partition));
            w.storedOffset = row?.next;
            w.storedMark = row?.mark;
          }
          ctx.logger.debug(
            { groupId: this.config.groupId, stored: Object.fromEntries(stored) },
            'effectively-once: stored kafka offsets loaded',
          );
          return;
        } catch (cause) {
          ctx.reportError(
            new DatabaseError('load stored kafka offsets', cause, {
              groupId: this.config.groupId,
              topics,
              attempt,
            }),
          );
          await sleep(retryDelay(attempt, STORED_OFFSETS_RETRY), signal);
        }
      }
    })();
    for (const w of workers) w.ready = loaded;
  }

  private async eachBatch(payload: EachBatchPayloadLike): Promise<void> {
    const { batch } = payload;
    const worker = this.workers.get(tpKey(batch.topic, batch.partition));
    if (worker === undefined || !worker.accepting || batch.messages.length === 0) return;
    let stored: bigint | undefined;
    if (this.offsetStore !== undefined) {
      await heartbeatWhile(worker.ready, payload);
      if (!worker.accepting) return;
      stored = worker.storedOffset;
      if (stored !== undefined && batch.highWatermark !== undefined) {
        const end = BigInt(batch.highWatermark);
        // Seeking there would fail, reset and land here again; skipping would lose records.
        if (stored > end) {
          if (worker.stall())
            this.ctx?.reportError(
              new StoredOffsetAheadError(
                this.config.groupId,
                batch.topic,
                batch.partition,
                stored,
                end,
              ),
            );
          return;
        }
      }
      if (stored !== undefined && !worker.markChecked && !this.checkMark(payload, worker, stored))
        return;
      const last = batch.messages[batch.messages.length - 1];
      if (stored !== undefined && last !== undefined && BigInt(last.offset) + 1n < stored) {
        // Everything fetched is a known duplicate: jump to the stored offset instead of reading through.
        this.consumer.seek({
          topic: batch.topic,
          partition: batch.partition,
          offset: stored.toString(),
        });
        return;
      }
    }
    if (batch.highWatermark !== undefined) worker.highWatermark = BigInt(batch.highWatermark);
    let resolved: string | undefined;
    let skipped = false;
    for (const message of batch.messages) {
      if (!payload.isRunning() || payload.isStale() || !worker.accepting) break;
      const offset = BigInt(message.offset);
      // Below the stored offset (offsets: 'postgres'): already applied, skipped without a
      // lookup, and finished at once, so the group's Kafka offset (its lag) moves past it.
      if (stored === undefined || offset >= stored)
        worker.enqueue(toKafkaRecord(batch, message), offset);
      else skipped = worker.skip(offset) || skipped;
      resolved = message.offset;
    }
    if (skipped) this.committer?.schedule();
    // Synchronously after the accepting check: a revoked worker never moves the new generation's position.
    if (resolved !== undefined && worker.accepting) payload.resolveOffset(resolved);
  }

  /**
   * `offsets: 'postgres'`, before anything below the stored offset is skipped: is the
   * record the table remembers (the mark) still the one at its offset? True when the
   * batch may go on; false when it was dropped: the consumer seeks to the mark (the batch
   * ends before it), or the mark does not match (the partition is stalled and reported).
   */
  private checkMark(
    payload: EachBatchPayloadLike,
    worker: PartitionWorker<T>,
    stored: bigint,
  ): boolean {
    const { batch } = payload;
    const mark = worker.storedMark;
    const first = batch.messages[0];
    // No mark (a row from before marks), or the fetch starts past it: nothing below the
    // mark is read, so nothing unchecked is skipped (the log no longer reaches the mark,
    // or this member resumes where it left off).
    if (mark === undefined || first === undefined || BigInt(first.offset) > mark.offset) {
      worker.markChecked = true;
      return true;
    }
    const at = batch.messages.find((m) => BigInt(m.offset) >= mark.offset);
    if (at === undefined) {
      this.consumer.seek({
        topic: batch.topic,
        partition: batch.partition,
        offset: mark.offset.toString(),
      });
      return false;
    }
    const found = timestampOf(at.timestamp);
    if (BigInt(at.offset) === mark.offset && found !== undefined && found !== mark.timestamp) {
      if (worker.stall())
        this.ctx?.reportError(
          new StoredOffsetAheadError(
            this.config.groupId,
            batch.topic,
            batch.partition,
            stored,
            BigInt(batch.highWatermark ?? -1),
            { offset: mark.offset, storedTimestamp: mark.timestamp, foundTimestamp: found },
          ),
        );
      return false;
    }
    // The same record, or none at that offset any more (compaction): as it was.
    worker.markChecked = true;
    return true;
  }

  private async drain(): Promise<void> {
    if (this.state === 'running') this.state = 'draining';
    const workers = [...this.workers.values()];
    this.pause(workers.map((w) => ({ topic: w.topic, partitions: [w.partition] })));
    await Promise.all(workers.map((w) => w.stop()));
  }

  private pause(topics: KafkaTopicPartitions[]): void {
    if (topics.length === 0) return;
    try {
      this.consumer.pause(topics);
    } catch (err) {
      this.ctx?.logger.warn({ err, topics }, 'effectively-once: kafka pause failed');
    }
  }

  private resume(topics: KafkaTopicPartitions[]): void {
    try {
      this.consumer.resume(topics);
    } catch (err) {
      this.ctx?.logger.warn({ err, topics }, 'effectively-once: kafka resume failed');
    }
  }
}

/**
 * A Kafka consumer-group source with an exactly-once effect in the consumer's database:
 * per-partition order, offsets committed only up to the contiguous finished records,
 * retries in place, dead-letter topic, and optional offsets stored with the effect.
 */
export function kafkaSource<T = unknown>(options: KafkaSourceOptions<T>): KafkaSource<T> {
  return new KafkaSource<T>(options);
}

function tpKey(topic: string, partition: number): string {
  return `${topic}/${partition}`;
}
