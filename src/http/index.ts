/**
 * `effectively-once/http`: Idempotency-Key endpoints and webhook receivers whose stored
 * response commits in the same Postgres transaction as their effect, over web
 * `Request`/`Response` (any server that speaks them, or Node's `http` through
 * `toNodeListener`). Express and Fastify have their own entry points,
 * `effectively-once/http/express` and `effectively-once/http/fastify`.
 * @packageDocumentation
 * @module effectively-once/http
 */
export { createIdempotency } from './idempotency.js';
export type {
  CloseOptions,
  Execution,
  Idempotency,
  IdempotencyEventName,
  IdempotencyEvents,
  IdempotencyStats,
  Outcome,
  RequestOverrides,
} from './idempotency-types.js';
export type { IdempotencyContext, IdempotentHandler } from './context.js';
export type { DataLayer, LayerTransactionSettings, SqlResult, SqlRunner } from '../data-layer.js';
export type { CommittedEvent, IdempotencyOptions } from './options.js';
export type {
  HttpRequestEnd,
  HttpRequestIdentity,
  HttpRequestScope,
  HttpTelemetryOutcome,
  IdempotencyTelemetry,
} from './telemetry.js';
export { DEFAULT_STORED_HEADERS, DEFAULT_KEY_LIFETIME_MS } from './options.js';
export { webhookSources, headerSource, bodyFieldSource, webhookScope } from './webhooks.js';
export type { WebhookHandler, WebhookOptions, WebhookSource } from './webhooks.js';
export { canonicalJson, fingerprint } from './fingerprint.js';
export type { FingerprintInput, FingerprintMode } from './fingerprint.js';
export { parseIdempotencyKey, DEFAULT_MAX_KEY_LENGTH } from './key.js';
export { pruneIdempotencyKeys, migrateKeyTable } from './store.js';
export type { BodyOmitted, PruneKeysOptions } from './store.js';
export { REPLAYED_HEADER, BODY_OMITTED_HEADER } from './replay.js';
export { toNodeListener } from './node-listener.js';
export { honoRequest } from './hono-request.js';
export type { HonoRequestLike } from './hono-request.js';
export type { FetchHandler, NodeListener, NodeListenerOptions } from './node-listener.js';
export {
  IdempotencyKeyInvalidError,
  IdempotencyKeyMissingError,
  IdempotencyKeyReusedError,
  RequestBodyConsumedError,
  RequestTooLargeError,
  WebhookDeliveryIdInvalidError,
  WebhookVerificationError,
} from './errors.js';
export type { MismatchReason } from './errors.js';
export {
  ClaimBusyError,
  ConfigurationError,
  DatabaseError,
  EffectivelyOnceError,
  HandlerTimeoutError,
  ReplicaUnconfirmedError,
  ReplicaUnseenError,
  RoutingError,
  RoutingViolationError,
} from '../errors.js';
export type { RoutedDatabase, RouteTarget, Routing } from '../routing/options.js';
export type { ReplicaSafeOptions } from '../replica/options.js';
export type { ReplicaReport, ReplicaState, ReplicaStatus } from '../replica/poller.js';
