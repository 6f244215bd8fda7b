import type { ReplicaReport } from '../replica/poller.js';
import { EventHub } from '../event-hub.js';
import type { EffectivelyOnceError } from '../errors.js';
import type { Logger } from '../types.js';
import type { OutboxStats } from './stats.js';

/** Payloads of a relay's events. */
export interface RelayEvents {
  /** `replicaSafe`: the watched standby's state changed (see `ReplicaReport`). */
  replica: ReplicaReport;
  /** A row was accepted downstream and marked published. `ageMs`: from its write to the mark. */
  published: {
    id: string;
    destination: string;
    orderingKey: string | null;
    attempts: number;
    ageMs: number;
  };
  /** A row's publish failed; it is retried after `retryInMs`. */
  failed: { id: string; destination: string; attempts: number; error: unknown; retryInMs: number };
  /** A row was given up on (attempts exhausted, or an error that cannot succeed later). */
  parked: { id: string; destination: string; attempts: number; error: unknown };
  /**
   * This relay's lease on a row was taken over (it ran past `leaseMs`): its mark was
   * refused by the fencing token and the row's new holder settles it.
   */
  fenced: { id: string; destination: string };
  /** One claimed batch settled; `latencyMs` from the claim to the last mark. */
  batch: {
    claimed: number;
    published: number;
    failed: number;
    parked: number;
    fenced: number;
    latencyMs: number;
  };
  /** The table's lag, every `lagIntervalMs` while someone listens. */
  lag: OutboxStats;
  /** Trouble outside a publish: a claim or mark failed, the LISTEN connection was lost. */
  error: EffectivelyOnceError;
}

/** Name of a relay event. */
export type RelayEventName = keyof RelayEvents;

/** The relay's typed event hub (the shared {@link EventHub}). */
export class RelayEventHub extends EventHub<RelayEvents> {
  constructor(logger: Logger) {
    super(logger, 'outbox relay');
  }
}
