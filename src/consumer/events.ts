import { EventEmitter } from 'node:events';
import type { ConsumerEventName, ConsumerEvents, Logger } from '../types.js';

/** Listener of one consumer event. */
export type Listener<E extends ConsumerEventName> = (payload: ConsumerEvents[E]) => void;

/**
 * Typed event hub. An `error` event with no listener is logged instead of thrown:
 * a broker hiccup must not crash the worker the way Node's default would.
 */
export class ConsumerEventHub {
  private readonly emitter = new EventEmitter();

  constructor(private readonly logger: Logger) {}

  on<E extends ConsumerEventName>(event: E, listener: Listener<E>): void {
    this.emitter.on(event, listener);
  }

  off<E extends ConsumerEventName>(event: E, listener: Listener<E>): void {
    this.emitter.off(event, listener);
  }

  /** Whether anyone listens to `event`: a hot path builds the payload only then. */
  listens(event: ConsumerEventName): boolean {
    return this.emitter.listenerCount(event) > 0;
  }

  emit<E extends ConsumerEventName>(event: E, payload: ConsumerEvents[E]): void {
    if (event === 'error' && this.emitter.listenerCount('error') === 0) {
      this.logger.error({ err: payload }, 'effectively-once: unhandled consumer error');
      return;
    }
    try {
      this.emitter.emit(event, payload);
    } catch (err) {
      // A throwing listener is the user's bug; it must not derail a delivery's settlement.
      this.logger.error({ err, event }, 'effectively-once: event listener threw');
    }
  }
}
