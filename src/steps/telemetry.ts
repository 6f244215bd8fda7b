/**
 * How telemetry sees each step of a flow's run. Steps depend on no telemetry library:
 * `otelStepsTelemetry()` from `effectively-once/otel` implements these hooks with
 * OpenTelemetry. A hook that throws is logged and ignored (the step goes on).
 */

/**
 * How one step of one run ended: `recorded` (it ran and its result committed),
 * `replayed` (recorded by an earlier run: its result returned, nothing run), `final`
 * (it failed with a final error or `run.fail`: the flow's answer), `stopped` (a
 * transient failure, a fenced owner, an unknown commit: the recovery point stays).
 */
export type StepTelemetryOutcome = 'recorded' | 'replayed' | 'final' | 'stopped';

/** What is known of a step when it starts. */
export interface StepTelemetryStart {
  /** The flow's name. */
  flow: string;
  /** The step's name. */
  step: string;
  /** `step` (a database step) or `call` (an outside call). */
  kind: 'step' | 'call';
  /** Its position in the flow (0 for the first). */
  position: number;
  /**
   * The run's attempt at the flow: its owner's fence (1 for the first run, one more at
   * every takeover by a retry, a redelivery or the completer).
   */
  attempt: number;
  /** Whether this run took over an earlier one. */
  resumed: boolean;
}

/** One step being followed; ended exactly once. */
export interface StepTelemetryScope {
  /** Runs the step's work with this scope's context active (a provider call's spans nest). */
  run<R>(fn: () => R): R;
  /** The step ended; `error` is what a `final` or `stopped` step failed with. */
  end(outcome: StepTelemetryOutcome, error?: unknown): void;
}

/** Hooks through which a flow's runner reports each step (`FlowStoreOptions.telemetry`). */
export interface StepsTelemetry {
  /** A step starts (or is replayed). */
  startStep(start: StepTelemetryStart): StepTelemetryScope;
}
