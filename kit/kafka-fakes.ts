import type {
  EachBatchPayloadLike,
  KafkaConsumerLike,
  KafkaCrashEvent,
  KafkaGroupJoinEvent,
  KafkaMessageLike,
  KafkaOutgoingMessage,
  KafkaProducerLike,
  KafkaRunConfig,
  KafkaTopicPartitionOffset,
  KafkaTopicPartitions,
} from '../adapters/kafka/index.js';
import { HandlerError, type EffectivelyOnceError } from '../src/errors.js';
import type { Delivery, DeliveryOutcome, Logger, SourceContext } from '../src/types.js';

type Listener = (event: unknown) => void;

/** What one `eachBatch` call did with its payload. */
export interface BatchResult {
  resolved: string | undefined;
}

/**
 * A kafkajs consumer stand-in driven by the test: `assign()` emits GROUP_JOIN,
 * `batch()` calls the adapter's eachBatch like kafkajs's fetch loop would.
 */
export class FakeConsumer implements KafkaConsumerLike {
  runConfig: KafkaRunConfig | undefined;
  readonly commits: KafkaTopicPartitionOffset[][] = [];
  readonly seeks: KafkaTopicPartitionOffset[] = [];
  readonly pausedSet = new Set<string>();
  readonly pauseLog: string[] = [];
  readonly heartbeats: number[] = [];
  subscribed: { topics: string[]; fromBeginning?: boolean } | undefined;
  connected = false;
  stopped = false;
  running = false;
  /** Makes the next commits reject with this error. */
  commitFailure: Error | undefined;
  heartbeatFailure: Error | undefined;
  private readonly listeners = new Map<string, Listener[]>();
  private readonly pendingSeeks = new Set<string>();

  async connect(): Promise<void> {
    this.connected = true;
  }
  async disconnect(): Promise<void> {
    this.running = false;
    this.connected = false;
  }
  async subscribe(subscription: { topics: string[]; fromBeginning?: boolean }): Promise<void> {
    this.subscribed = subscription;
  }
  async run(config: KafkaRunConfig): Promise<void> {
    this.runConfig = config;
    this.running = true;
  }
  async stop(): Promise<void> {
    this.running = false;
    this.stopped = true;
  }
  async commitOffsets(offsets: KafkaTopicPartitionOffset[]): Promise<void> {
    await Promise.resolve();
    if (this.commitFailure) throw this.commitFailure;
    this.commits.push(offsets);
  }
  seek(position: KafkaTopicPartitionOffset): void {
    this.seeks.push(position);
    this.pendingSeeks.add(`${position.topic}/${position.partition}`);
  }
  pause(topics: KafkaTopicPartitions[]): void {
    for (const { topic, partitions } of topics)
      for (const p of partitions) {
        this.pausedSet.add(`${topic}/${p}`);
        this.pauseLog.push(`pause ${topic}/${p}`);
      }
  }
  resume(topics: KafkaTopicPartitions[]): void {
    for (const { topic, partitions } of topics)
      for (const p of partitions) {
        this.pausedSet.delete(`${topic}/${p}`);
        this.pauseLog.push(`resume ${topic}/${p}`);
      }
  }
  on(event: 'consumer.group_join', listener: (event: KafkaGroupJoinEvent) => void): unknown;
  on(event: 'consumer.rebalancing', listener: (event: unknown) => void): unknown;
  on(event: 'consumer.crash', listener: (event: KafkaCrashEvent) => void): unknown;
  on(event: string, listener: (event: never) => void): unknown {
    const list = this.listeners.get(event) ?? [];
    list.push(listener as Listener);
    this.listeners.set(event, list);
    return () =>
      this.listeners.set(
        event,
        (this.listeners.get(event) ?? []).filter((l) => l !== listener),
      );
  }

  listenerCount(event: string): number {
    return this.listeners.get(event)?.length ?? 0;
  }

  /** Emits GROUP_JOIN with this assignment (as kafkajs does at the end of a join). */
  assign(assignment: Record<string, number[]>): void {
    this.pendingSeeks.clear();
    this.emit('consumer.group_join', { payload: { memberAssignment: assignment } });
  }
  rebalancing(): void {
    this.emit('consumer.rebalancing', { payload: {} });
  }
  crash(error: Error, restart: boolean): void {
    this.emit('consumer.crash', { payload: { error, restart } });
  }

  /** Hands one batch to eachBatch. Offsets default to consecutive from `from`. */
  async batch(
    topic: string,
    partition: number,
    messages: KafkaMessageLike[],
  ): Promise<BatchResult> {
    const config = this.runConfig;
    if (!config) throw new Error('consumer.run() was not called');
    const result: BatchResult = { resolved: undefined };
    const key = `${topic}/${partition}`;
    this.pendingSeeks.delete(key);
    const payload: EachBatchPayloadLike = {
      batch: { topic, partition, messages },
      resolveOffset: (offset) => {
        result.resolved = offset;
      },
      heartbeat: async () => {
        this.heartbeats.push(Date.now());
        if (this.heartbeatFailure) throw this.heartbeatFailure;
      },
      isRunning: () => this.running,
      isStale: () => this.pendingSeeks.has(key),
    };
    await config.eachBatch(payload);
    return result;
  }

  /** The last committed offset of a partition, as a number. */
  committed(topic: string, partition: number): number | undefined {
    let last: number | undefined;
    for (const commit of this.commits)
      for (const c of commit)
        if (c.topic === topic && c.partition === partition) last = Number(c.offset);
    return last;
  }

  private emit(event: string, payload: unknown): void {
    for (const l of this.listeners.get(event) ?? []) l(payload);
  }
}

/** A kafkajs producer stand-in that records what it sends. */
export class FakeProducer implements KafkaProducerLike {
  readonly sent: Array<{ topic: string; acks?: number; message: KafkaOutgoingMessage }> = [];
  connects = 0;
  disconnected = false;
  failures = 0;
  async connect(): Promise<void> {
    this.connects++;
  }
  async disconnect(): Promise<void> {
    this.disconnected = true;
  }
  async send(record: {
    topic: string;
    acks?: number;
    messages: KafkaOutgoingMessage[];
  }): Promise<unknown> {
    if (this.failures > 0) {
      this.failures--;
      throw new Error('broker down');
    }
    for (const message of record.messages)
      this.sent.push({ topic: record.topic, acks: record.acks, message });
    return [];
  }
}

/** Makes messages with consecutive offsets starting at `from`. */
export function messages(
  from: number,
  count: number,
  make: (offset: number) => Partial<KafkaMessageLike> = () => ({}),
): KafkaMessageLike[] {
  return Array.from({ length: count }, (_, i) => message(from + i, make(from + i)));
}

export function message(offset: number, fields: Partial<KafkaMessageLike> = {}): KafkaMessageLike {
  return {
    key: null,
    value: Buffer.from(JSON.stringify({ n: offset })),
    offset: String(offset),
    timestamp: '1700000000000',
    headers: {},
    ...fields,
  };
}

/** How the fake runner settles one delivery. */
export type Verdict =
  | { do: 'ack' }
  | { do: 'retry'; delayMs?: number; reason?: EffectivelyOnceError }
  | { do: 'deadLetter'; reason: EffectivelyOnceError }
  | { do: 'release' }
  | { do: 'nothing' };

export interface FakeRunner<T> {
  ctx: SourceContext<T>;
  controller: AbortController;
  delivered: Array<Delivery<T>>;
  errors: EffectivelyOnceError[];
  logs: string[];
  inFlight(): number;
  maxInFlight(): number;
}

/**
 * Plays the runner: `decide` settles each delivery the way the real runner would
 * (calling ack/retry/deadLetter/release) and may wait first to hold it in flight.
 */
export function fakeRunner<T>(
  decide: (delivery: Delivery<T>) => Promise<Verdict> | Verdict = () => ({ do: 'ack' }),
  options: { capacity?: number } = {},
): FakeRunner<T> {
  const controller = new AbortController();
  const delivered: Array<Delivery<T>> = [];
  const errors: EffectivelyOnceError[] = [];
  const logs: string[] = [];
  const capacity = options.capacity ?? 1000;
  let inFlight = 0;
  let maxInFlight = 0;
  const waiters: Array<() => void> = [];
  const log = (_obj: object, msg?: string) => logs.push(msg ?? '');
  const logger: Logger = { debug: () => undefined, info: () => undefined, warn: log, error: log };
  const ctx: SourceContext<T> = {
    signal: controller.signal,
    hardStop: new AbortController().signal,
    logger,
    deliver: async (delivery): Promise<DeliveryOutcome> => {
      delivered.push(delivery);
      inFlight++;
      maxInFlight = Math.max(maxInFlight, inFlight);
      try {
        const verdict = await decide(delivery);
        switch (verdict.do) {
          case 'ack':
            await delivery.ack();
            return 'processed';
          case 'retry':
            await delivery.retry(verdict.delayMs ?? 0, verdict.reason ?? fakeError());
            return 'retry';
          case 'deadLetter':
            try {
              await delivery.deadLetter(verdict.reason);
              return 'dead-lettered';
            } catch (error) {
              errors.push(error as EffectivelyOnceError);
              return 'unsettled';
            }
          case 'release':
            await delivery.release();
            return 'released';
          case 'nothing':
            return 'unsettled';
        }
      } finally {
        inFlight--;
        for (const w of waiters.splice(0)) w();
      }
    },
    freeCapacity: () => Math.max(0, capacity - inFlight),
    waitForCapacity: () =>
      new Promise<void>((resolve) => {
        if (capacity - inFlight > 0 || controller.signal.aborted) return resolve();
        waiters.push(resolve);
      }),
    reportError: (error) => errors.push(error),
  };
  return {
    ctx,
    controller,
    delivered,
    errors,
    logs,
    inFlight: () => inFlight,
    maxInFlight: () => maxInFlight,
  };
}

function fakeError(): EffectivelyOnceError {
  return new HandlerError('k', 1, new Error('boom'));
}

/** Resolves after all queued microtasks and timers up to `ms` ran. */
export function tick(ms = 0): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** A gate a test opens by hand. */
export function gate(): { promise: Promise<void>; open: () => void } {
  let open!: () => void;
  const promise = new Promise<void>((resolve) => (open = resolve));
  return { promise, open };
}
