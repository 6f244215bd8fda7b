import { EventHub } from '../event-hub.js';
import type { ConsumerEventName, ConsumerEvents, Logger } from '../types.js';

/** Listener of one consumer event. */
export type Listener<E extends ConsumerEventName> = (payload: ConsumerEvents[E]) => void;

/** The consumer's typed event hub (the shared {@link EventHub}). */
export class ConsumerEventHub extends EventHub<ConsumerEvents> {
  constructor(logger: Logger) {
    super(logger, 'consumer');
  }
}
