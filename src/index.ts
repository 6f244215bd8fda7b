/**
 * `effectively-once`: an exactly-once effect for at-least-once consumers. Each
 * delivery's key is claimed in Postgres inside the transaction the handler writes
 * with; the broker is acked only after that transaction committed.
 * @packageDocumentation
 * @module effectively-once
 */
// The surface is listed name by name (no `export *`): what is not here is internal.
// etc/effectively-once.api.md is its report; `npm run api:check` fails when it drifts.
export { createConsumer } from './consumer/consumer.js';
export type { Consumer, StopOptions } from './consumer/types.js';
export type { AdmissionFloorOptions, ConsumerOptions } from './consumer/options.js';
export type { IsolationLevel } from './store/claim.js';
export type { RetentionOptions, StoreOptions, TransactionOptions } from './shared-options.js';
export type { DataLayer, LayerTransactionSettings, SqlResult, SqlRunner } from './data-layer.js';
export { DOOR_DEFAULTS } from './shared-options.js';
export type { Observable } from './event-hub.js';
export { migrate } from './store/migrate.js';
export type { MigrateOptions } from './store/migrate.js';
export { prune } from './store/prune.js';
export type { PruneOptions } from './store/prune.js';
export { DEFAULT_SCHEMA, DEFAULT_TABLE } from './store/identifiers.js';
export { DEFAULT_MAX_KEY_LENGTH, MAX_KEY_BYTES } from './keys.js';
export type { Listener } from './consumer/events.js';
export type {
  ConsumerTelemetry,
  TelemetryOutcome,
  TelemetryScope,
  TelemetryStep,
  TelemetryStepScope,
} from './consumer/telemetry.js';
export { defineFlow, defaultFinalError, derivedKey } from './steps/flow.js';
export { createFlowRunner } from './steps/runner.js';
export { createStepsCompleter } from './steps/completer.js';
export { flowHandler } from './steps/consumer-door.js';
export { DEFAULT_FLOWS_TABLE } from './steps/table.js';
export {
  FlowFencedError,
  FlowKeyReusedError,
  FlowStepsChangedError,
  StepFailedError,
  StepResultNotJsonError,
} from './steps/errors.js';
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
} from './steps/types.js';
export type {
  StepsTelemetry,
  StepTelemetryOutcome,
  StepTelemetryScope,
  StepTelemetryStart,
} from './steps/telemetry.js';
export {
  EffectivelyOnceError,
  ConfigurationError,
  InvalidKeyError,
  BodyParseError,
  ClaimBusyError,
  PayloadMismatchError,
  DeliveryExpiredError,
  HandlerTimeoutError,
  HandlerError,
  CommitUnknownError,
  CommitFailedError,
  TransactionAbortedError,
  TransactionControlError,
  StateError,
  DatabaseError,
  MigrationChecksumError,
  MigrationsPendingError,
  BrokerError,
  ShutdownError,
  ReplicaUnseenError,
  ReplicaUnconfirmedError,
  RoutingError,
  RoutingViolationError,
} from './errors.js';
export type { RoutedDatabase, RouteTarget, Routing } from './routing/options.js';
export type {
  ReplicaLevel,
  ReplicaSafeOptions,
  ReplicaSyncCommitOptions,
  ReplicaWaitOptions,
} from './replica/options.js';
export type { ReplicaReport, ReplicaState, ReplicaStatus } from './replica/poller.js';
export type {
  Backoff,
  BatchContext,
  BatchHandler,
  BatchItem,
  ConsumerEventName,
  ConsumerEvents,
  ConsumerStats,
  Delivery,
  DeliveryOutcome,
  Handler,
  HandlerContext,
  Logger,
  MessagingInfo,
  MismatchPolicy,
  Source,
  SourceContext,
} from './types.js';
