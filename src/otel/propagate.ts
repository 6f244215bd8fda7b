import { context, propagation } from '@opentelemetry/api';

/**
 * For `idempotentFetch`'s `propagate` option: writes the active OpenTelemetry context
 * (W3C `traceparent` and `tracestate`, once an SDK registered the propagator) into the
 * request's headers, so the server's span joins the caller's trace.
 */
export function propagateTraceContext(headers: Headers): void {
  propagation.inject(context.active(), headers, {
    set: (carrier, key, value) => carrier.set(key, value),
  });
}
