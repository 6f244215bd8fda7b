import type { Observable } from '../event-hub.js';
import type { ConsumerEvents, ConsumerStats } from '../types.js';

/** Options of {@link Consumer.stop}. */
export interface StopOptions {
  /**
   * Grace period for in-flight handlers. After it, their `ctx.signal` aborts and they
   * are given up on: a handler still running has its statement cancelled and its
   * connection destroyed (it never commits), and its delivery is released to the
   * broker; what committed before is acked. Default 30 000 ms.
   */
  timeoutMs?: number;
}

/**
 * A running consumer: one source, one handler, one dedup namespace. Observed like every
 * door: `on(event, listener)` / `off` (returning the consumer) and `stats()`.
 */
export interface Consumer extends Observable<ConsumerEvents, ConsumerStats, Consumer> {
  /** Migrates the dedup table (unless `migrate: false`) and starts receiving. */
  start(): Promise<void>;
  /**
   * Stops receiving, lets in-flight deliveries finish (or aborts them after the
   * grace period), acks what committed, releases what never started, then resolves.
   */
  stop(options?: StopOptions): Promise<void>;
  /** Resolves when the source's receive loop ends on its own (or after `stop`). */
  readonly done: Promise<void>;
  /** `await using consumer = createConsumer(...)` stops it at scope exit. */
  [Symbol.asyncDispose](): Promise<void>;
}
