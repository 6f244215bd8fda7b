import type { Observable } from '../event-hub.js';
import type { RelayEvents } from './events.js';
import type { ReplicaStatus } from '../replica/poller.js';
import type { OutboxStats } from './stats.js';

// The relay's public face, in a module of its own: `createRelay` (relay.ts) builds one
// and the telemetry hooks (telemetry.ts) are handed one, so both import it from here.

/** Counters of one relay since it was created; monotonic (`replica` aside). */
export interface RelayStats {
  /** Rows marked published. */
  published: number;
  /** Failed publish attempts (retried or parked). */
  failed: number;
  /** Rows parked. */
  parked: number;
  /** Marks refused because another relay had taken the row over. */
  fenced: number;
  /** Batches claimed and settled. */
  batches: number;
  /** With `replicaSafe`: the watched standby as last polled (not a counter). */
  replica?: ReplicaStatus;
}

/**
 * A running (or startable) relay. Observed like every door: `on(event, listener)` /
 * `off` (returning the relay) and `stats()`, its counters.
 */
export interface Relay extends Observable<RelayEvents, RelayStats, Relay> {
  /** This relay's `lease_owner`. */
  readonly owner: string;
  /**
   * The destinations it publishes (its `publishers`' keys), sorted: the only rows it
   * claims. Rows of other destinations are left to the relays that publish them.
   */
  readonly destinations: readonly string[];
  /** Starts LISTENing and relaying. Rejects if already started. */
  start(): Promise<void>;
  /**
   * Stops claiming, waits for the batch in flight to be published and marked (at most
   * `publishTimeoutMs` plus the marks), then closes the LISTEN connection. Nothing is
   * left leased by a relay that stopped this way. During `start()`, it lets the start
   * finish first; called again, it returns the same promise.
   */
  stop(): Promise<void>;
  /** Looks for due rows now, as a notification would. */
  wake(): void;
  /**
   * The table's pending and parked counts and its lag, in all and per destination (a
   * query, as {@link outboxStats}); `destination` narrows them to one (whether this
   * relay publishes it or not). The relay's own counters are `stats()`.
   */
  outboxStats(options?: { destination?: string }): Promise<OutboxStats>;
}
