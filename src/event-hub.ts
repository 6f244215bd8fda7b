import { EventEmitter } from 'node:events';
import type { Logger } from './types.js';

/**
 * The observation surface every door shares: subscribe to a named event with `on`, leave
 * with `off` (both return the door, for chaining), and read counters with `stats()`.
 * `Events` maps each event's name to its payload; `Stats` is the door's counters.
 */
export interface Observable<Events extends object, Stats, Self> {
  /** Subscribes `listener` to `event`; returns the door, for chaining. */
  on<E extends keyof Events & string>(event: E, listener: (payload: Events[E]) => void): Self;
  /** Unsubscribes `listener` from `event`; returns the door, for chaining. */
  off<E extends keyof Events & string>(event: E, listener: (payload: Events[E]) => void): Self;
  /** A snapshot of the door's counters since it was created. */
  stats(): Stats;
}

/**
 * Typed event hub behind each door's `on`/`off`. An `error` event with no listener is
 * logged instead of thrown (a broker or database hiccup must not crash the process the
 * way Node's default would), and a throwing listener is logged, not propagated: it is
 * the user's bug and must not derail a settlement.
 */
export class EventHub<Events extends object> {
  private readonly emitter = new EventEmitter();

  /** `door` names the door in the log lines (`consumer`, `outbox relay`, `idempotency`). */
  constructor(
    private readonly logger: Logger,
    private readonly door: string,
  ) {}

  on<E extends keyof Events & string>(event: E, listener: (payload: Events[E]) => void): void {
    this.emitter.on(event, listener);
  }

  off<E extends keyof Events & string>(event: E, listener: (payload: Events[E]) => void): void {
    this.emitter.off(event, listener);
  }

  /** Whether anyone listens to `event`: a hot path builds the payload only then. */
  listens(event: keyof Events & string): boolean {
    return this.emitter.listenerCount(event) > 0;
  }

  emit<E extends keyof Events & string>(event: E, payload: Events[E]): void {
    if (event === 'error' && !this.listens(event)) {
      this.logger.error({ err: payload }, `effectively-once: unhandled ${this.door} error`);
      return;
    }
    try {
      this.emitter.emit(event, payload);
    } catch (err) {
      this.logger.error({ err, event }, `effectively-once: ${this.door} event listener threw`);
    }
  }
}
