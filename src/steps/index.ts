/** The steps surface, re-exported name by name by the package's entry points. */
export { defineFlow, defaultFinalError, derivedKey } from './flow.js';
export { createFlowRunner } from './runner.js';
export { createStepsCompleter } from './completer.js';
export { flowHandler } from './consumer-door.js';
export { DEFAULT_FLOWS_TABLE } from './table.js';
export {
  FlowFencedError,
  FlowKeyReusedError,
  FlowStepsChangedError,
  StepFailedError,
  StepResultNotJsonError,
} from './errors.js';
export type {
  FinalErrorClassifier,
  Flow,
  FlowAnswer,
  FlowFunction,
  FlowHandlerOptions,
  FlowOptions,
  FlowOutcome,
  FlowRun,
  FlowRunner,
  FlowStart,
  FlowStoreOptions,
  StepsCompleter,
  StepsCompleterOptions,
  StepsRouteOptions,
} from './types.js';
export type {
  StepsTelemetry,
  StepTelemetryOutcome,
  StepTelemetryScope,
  StepTelemetryStart,
} from './telemetry.js';
