import type { Consumer } from './types.js';
import type { EffectivelyOnceError } from '../errors.js';
import type { Delivery, DeliveryOutcome } from '../types.js';

/**
 * A timed part of a delivery: `transaction` (from checkout to COMMIT or rollback; run
 * again after a serialization failure), inside it the `claim`, the `handler` (with the
 * adapter's in-transaction hook) and the verified `commit`.
 */
export type TelemetryStep = 'transaction' | 'claim' | 'handler' | 'commit';

/**
 * How telemetry sees the end of one delivery: its {@link DeliveryOutcome}, or
 * `mismatch` when its key came back with another payload (then dead-lettered, or acked
 * with `onMismatch: 'ack'`), or `expired` when the admission floor refused it (then
 * dead-lettered).
 */
export type TelemetryOutcome = DeliveryOutcome | 'mismatch' | 'expired';

/** A running step: its context is active inside `run`, so the handler's own spans nest in it. */
export interface TelemetryStepScope {
  /** Runs `fn` with this step as the active context. */
  run<R>(fn: () => R): R;
  /** Ends the step; `error` when it failed. */
  end(error?: unknown): void;
}

/**
 * One unit of work being followed: a delivery (one transaction per message) or a
 * batch (batch mode). Ended exactly once, after every delivery in it was settled.
 */
export interface TelemetryScope {
  /** Starts a step of this unit's transaction. */
  step(name: TelemetryStep): TelemetryStepScope;
  /**
   * A delivery of this unit was settled; `error` is the failure that led to a retry or a
   * dead letter (or the mismatch).
   */
  settled(
    delivery: Delivery<unknown>,
    outcome: TelemetryOutcome,
    error: EffectivelyOnceError | undefined,
  ): void;
  /** Nothing more happens in this unit. */
  end(): void;
}

/**
 * Hooks through which a consumer reports what it does, for tracing and metrics. The core
 * calls them and depends on no telemetry library: `otelTelemetry()` from
 * `effectively-once/otel` implements them with OpenTelemetry. A hook that throws is
 * ignored (the delivery goes on).
 */
export interface ConsumerTelemetry {
  /** Called once by `createConsumer`, so the hooks can read `stats()` and listen to events. */
  attach?(consumer: Consumer, name: string): void;
  /** A delivery was handed to a consumer that runs one transaction per message. */
  startDelivery(delivery: Delivery<unknown>, consumer: string): TelemetryScope;
  /** Batch mode: a gathered batch starts (its transactions may be bisected). */
  startBatch(deliveries: ReadonlyArray<Delivery<unknown>>, consumer: string): TelemetryScope;
}
