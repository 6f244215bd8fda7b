import type { Relay } from './relay-types.js';
import type { OutboxRecord } from './record.js';

/**
 * One publisher call being followed: the records to hand to the publisher (the same
 * ones, or copies whose headers carry the publish span's trace context) and the end of
 * the call.
 */
export interface RelayPublishScope {
  /** What the publisher is given, in the same order and with the same ids. */
  readonly records: readonly OutboxRecord[];
  /** The publisher answered (or timed out); `failures` maps the ids it did not accept to their errors. */
  end(failures: ReadonlyMap<string, unknown>): void;
}

/**
 * Hooks through which a relay reports its publishing, for tracing and metrics. The
 * outbox depends on no telemetry library: `otelRelayTelemetry()` from
 * `effectively-once/otel` implements them with OpenTelemetry. A hook that throws is
 * logged and ignored (the rows are published as they are).
 */
export interface RelayTelemetry {
  /** Called once by `createRelay`, so the hooks can listen to its events (metrics). */
  attach?(relay: Relay): void;
  /** A destination's claimed rows are about to be handed to its publisher. */
  startPublish(destination: string, records: readonly OutboxRecord[]): RelayPublishScope;
}
