/**
 * `effectively-once/otel`: OpenTelemetry tracing and metrics for consumers, the outbox
 * relay and idempotent HTTP endpoints, through the `@opentelemetry/api` peer dependency
 * (no SDK: the application brings its own).
 * @packageDocumentation
 * @module effectively-once/otel
 */
export { otelTelemetry, INSTRUMENTATION_NAME } from './telemetry.js';
export type { OtelTelemetryOptions } from './telemetry.js';
export { METRIC } from './metrics.js';
export { ATTR } from './attributes.js';
export { propagateTraceContext } from './propagate.js';
export { otelRelayTelemetry, outboxTraceHeaders, OUTBOX_METRIC } from './outbox.js';
export type { OtelRelayTelemetryOptions } from './outbox.js';
export { otelIdempotencyTelemetry, HTTP_METRIC, HTTP_ATTR } from './http.js';
export type { OtelIdempotencyTelemetryOptions } from './http.js';
export { otelStepsTelemetry, STEPS_ATTR } from './steps.js';
export type { OtelStepsTelemetryOptions } from './steps.js';
