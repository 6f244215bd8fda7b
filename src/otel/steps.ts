import {
  context as contextApi,
  SpanKind,
  SpanStatusCode,
  trace as traceApi,
  type TracerProvider,
} from '@opentelemetry/api';
import type {
  StepsTelemetry,
  StepTelemetryOutcome,
  StepTelemetryScope,
  StepTelemetryStart,
} from '../steps/telemetry.js';
import { ATTR } from './attributes.js';
import { INSTRUMENTATION_NAME } from './telemetry.js';

/** Attribute names of a step's span. */
export const STEPS_ATTR = {
  flow: 'effectively_once.flow',
  step: 'effectively_once.step',
  /** `step` (a database step) or `call` (an outside call). */
  kind: 'effectively_once.step.kind',
  /** The step's position in the flow, 0 for the first. */
  position: 'effectively_once.step.position',
  /** The run's attempt at the flow: its owner's fence (1, then one more per takeover). */
  attempt: ATTR.attempt,
  /** Whether this run took over an earlier one. */
  resumed: 'effectively_once.flow.resumed',
  /** `recorded`, `replayed`, `final` or `stopped` (see `StepTelemetryOutcome`). */
  outcome: ATTR.outcome,
} as const;

/** Options of {@link otelStepsTelemetry}. */
export interface OtelStepsTelemetryOptions {
  /** Where spans go. Default: the global tracer provider. */
  tracerProvider?: TracerProvider;
}

/**
 * OpenTelemetry for steps: pass it as `telemetry` to `createFlowRunner`,
 * `createStepsCompleter`, or a steps route (`idempotency.steps(flow, { telemetry })`).
 * Each step of each run is an `INTERNAL` span `step <flow>.<step>`, child of the active
 * one (the request's, the delivery's), with {@link STEPS_ATTR}: flow, step, kind,
 * position, attempt (the owner's fence), resumed, and the outcome — `replayed` for a
 * step a resumed run found recorded (a span of no duration: nothing ran). The step's
 * work runs with its span active, so a provider call's client spans nest under it. A
 * `stopped` step's span is an error (`error.type` the library's error code); a `final`
 * one is not: the flow ended with its stored answer, as the user's classifier decided.
 */
export function otelStepsTelemetry(options: OtelStepsTelemetryOptions = {}): StepsTelemetry {
  const tracer = (options.tracerProvider ?? traceApi.getTracerProvider()).getTracer(
    INSTRUMENTATION_NAME,
  );
  return {
    startStep(start: StepTelemetryStart): StepTelemetryScope {
      const parent = contextApi.active();
      const span = tracer.startSpan(
        `step ${start.flow}.${start.step}`,
        {
          kind: SpanKind.INTERNAL,
          attributes: {
            [STEPS_ATTR.flow]: start.flow,
            [STEPS_ATTR.step]: start.step,
            [STEPS_ATTR.kind]: start.kind,
            [STEPS_ATTR.position]: start.position,
            [STEPS_ATTR.attempt]: start.attempt,
            [STEPS_ATTR.resumed]: start.resumed,
          },
        },
        parent,
      );
      const ctx = traceApi.setSpan(parent, span);
      return {
        run: (fn) => contextApi.with(ctx, fn),
        end: (outcome: StepTelemetryOutcome, error?: unknown) => {
          span.setAttribute(STEPS_ATTR.outcome, outcome);
          if (outcome === 'stopped') {
            const err = error instanceof Error ? error : new Error(String(error));
            span.recordException(err);
            span.setAttribute('error.type', codeOf(error) ?? err.name);
            span.setStatus({ code: SpanStatusCode.ERROR });
          }
          span.end();
        },
      };
    },
  };
}

/** The library's error code of `error` (EO_…), when it has one. */
function codeOf(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null | undefined)?.code;
  return typeof code === 'string' ? code : undefined;
}
