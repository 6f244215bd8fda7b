import type { EffectivelyOnceError } from '../errors.js';
import type { Delivery, DeliveryOutcome, MessagingInfo, Source, SourceContext } from '../types.js';

/** How a message was sent to a {@link MemorySource}. */
export interface MemorySendOptions {
  /** Dedup key. Default: a fresh id per send (like SQS `MessageId`). */
  key?: string;
  /** Deliveries of one ordering key never run at once. */
  orderingKey?: string;
  /** Bytes used for the payload hash. Default: `JSON.stringify(body)`. */
  payload?: string;
  /** Message headers (e.g. a producer's `traceparent`), as telemetry reads them. */
  headers?: Readonly<Record<string, string>>;
  /** Make the delivery undecodable: the runner must dead-letter it without running the handler. */
  rejection?: EffectivelyOnceError;
}

/** One message held by a {@link MemorySource}. */
export interface MemoryMessage<T> {
  /** Sequence number of the send, from 1. */
  readonly id: number;
  /** The body as sent. */
  readonly body: T;
  /** The options it was sent with. */
  readonly options: MemorySendOptions;
  /** Deliveries so far. */
  attempts: number;
  /** Where it is: waiting, delivered and not yet settled, or done. */
  state: 'queued' | 'in-flight' | 'acked' | 'dead-lettered';
  /** `Date.now()` from which it may be delivered (after a retry's delay). */
  visibleAt: number;
  /** Outcomes reported by the runner, one per delivery. */
  readonly outcomes: DeliveryOutcome[];
  /** Why the message was dead-lettered. */
  deadLetterReason?: EffectivelyOnceError;
}

/** Options of {@link memorySource}. */
export interface MemorySourceOptions {
  /** How often the source looks for visible messages when idle. Default 5 ms. */
  pollIntervalMs?: number;
}

/**
 * An in-memory at-least-once source for unit tests of handlers. It behaves like a
 * queue with visibility: retried messages come back after their delay, and the test
 * can inject what real brokers do: duplicate sends, redelivery of a message still in
 * flight, and "crash after COMMIT, before ack" (the ack is lost, the message returns).
 */
export class MemorySource<T> implements Source<T> {
  /** Always `memory`. */
  readonly description = 'memory';
  /** Every message sent, in order, with its state. */
  readonly messages: Array<MemoryMessage<T>> = [];
  private nextId = 1;
  private lostAcks = 0;
  private failingAcks = 0;
  private readonly pollIntervalMs: number;
  private wakeUp: (() => void) | undefined;
  private readonly inFlight = new Set<Promise<DeliveryOutcome>>();

  constructor(options: MemorySourceOptions = {}) {
    this.pollIntervalMs = options.pollIntervalMs ?? 5;
  }

  /** Enqueues a message; returns it so the test can watch its state. */
  send(body: T, options: MemorySendOptions = {}): MemoryMessage<T> {
    const message: MemoryMessage<T> = {
      id: this.nextId++,
      body,
      options,
      attempts: 0,
      state: 'queued',
      visibleAt: 0,
      outcomes: [],
    };
    this.messages.push(message);
    this.wakeUp?.();
    return message;
  }

  /** The next `count` acks report success but are lost: those messages come back, as after a crash. */
  loseNextAcks(count = 1): void {
    this.lostAcks += count;
  }

  /** The next `count` acks reject, as a broker refusing a delete; the message comes back later. */
  failNextAcks(count = 1): void {
    this.failingAcks += count;
  }

  /** Delivers a message again while it may still be in flight, like an expired visibility timeout. */
  redeliver(message: MemoryMessage<T>): void {
    if (message.state === 'acked' || message.state === 'dead-lettered') return;
    message.state = 'queued';
    message.visibleAt = 0;
    this.wakeUp?.();
  }

  /** Messages not yet acked or dead-lettered. */
  get outstanding(): number {
    return this.messages.filter((m) => m.state === 'queued' || m.state === 'in-flight').length;
  }

  /** Receives until `ctx.signal` aborts (see `Source.run`). */
  async run(ctx: SourceContext<T>): Promise<void> {
    while (!ctx.signal.aborted) {
      await ctx.waitForCapacity();
      if (ctx.signal.aborted) break;
      const now = Date.now();
      const next = this.messages.find((m) => m.state === 'queued' && m.visibleAt <= now);
      if (next === undefined) {
        await this.idle(ctx.signal);
        continue;
      }
      next.state = 'in-flight';
      next.attempts++;
      const outcome = ctx.deliver(this.delivery(next));
      this.inFlight.add(outcome);
      void outcome.then((o) => {
        next.outcomes.push(o);
        this.inFlight.delete(outcome);
      });
    }
    await Promise.all(this.inFlight);
  }

  /** Flushes pending acks and releases what the source created (see `Source.close`). */
  async close(): Promise<void> {
    await Promise.all(this.inFlight);
  }

  private delivery(message: MemoryMessage<T>): Delivery<T> {
    const attempt = message.attempts;
    // A delivery only settles the message if no newer delivery of it started since.
    const current = () => message.attempts === attempt;
    return {
      key: message.options.key ?? `memory-${message.id}`,
      body: message.body,
      payload: message.options.payload ?? JSON.stringify(message.body),
      raw: message,
      attempt,
      orderingKey: message.options.orderingKey,
      rejection: message.options.rejection,
      messaging: (): MessagingInfo => ({
        system: 'memory',
        destination: this.description,
        messageId: String(message.id),
        carrier: message.options.headers ?? {},
      }),
      ack: async () => {
        if (this.failingAcks > 0) {
          this.failingAcks--;
          if (current()) this.requeue(message, 0);
          throw new Error('memory source: ack refused');
        }
        if (this.lostAcks > 0) {
          this.lostAcks--;
          if (current()) this.requeue(message, 0);
          return;
        }
        if (message.state !== 'dead-lettered') message.state = 'acked';
      },
      retry: async (delayMs) => {
        if (current()) this.requeue(message, delayMs);
      },
      deadLetter: async (reason) => {
        message.state = 'dead-lettered';
        message.deadLetterReason = reason;
      },
      release: async () => {
        if (!current()) return;
        message.attempts--;
        this.requeue(message, 0);
      },
    };
  }

  private requeue(message: MemoryMessage<T>, delayMs: number): void {
    if (message.state === 'acked' || message.state === 'dead-lettered') return;
    message.state = 'queued';
    message.visibleAt = Date.now() + delayMs;
    this.wakeUp?.();
  }

  private idle(signal: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        signal.removeEventListener('abort', done);
        this.wakeUp = undefined;
        resolve();
      };
      const timer = setTimeout(done, this.pollIntervalMs);
      signal.addEventListener('abort', done, { once: true });
      this.wakeUp = done;
    });
  }
}

/** Creates an in-memory at-least-once source (see {@link MemorySource}). */
export function memorySource<T = unknown>(options: MemorySourceOptions = {}): MemorySource<T> {
  return new MemorySource<T>(options);
}
