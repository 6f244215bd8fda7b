/**
 * What the web-framework adapters (`adapters/express/`, `adapters/fastify/`) build on:
 * the one door they use into src/http, so the seam between the request side and a
 * framework is a list here, not a scatter of deep imports (dependency-cruiser holds
 * them to it). Not an entry point: users import `effectively-once/http` and the
 * adapters' own entry points.
 */
export { ConfigurationError } from '../errors.js';
export { HandlerRun } from './completion.js';
export { hooksOf, type IdempotencyContext } from './context.js';
export { declaredBody, declaredResponse, type DeclaredBody, type KeptBody } from './held-body.js';
export { HeldResponse } from './held-response.js';
export {
  executeBuffered,
  type BufferedExecutor,
  type Execution,
  type Idempotency,
  type RequestOverrides,
} from './idempotency-types.js';
export { carrierResponse, knownBytes } from './known-body.js';
export {
  nodeHeaders,
  nodeRequestHead,
  requestUrl,
  restoreHeaders,
  snapshotHeaders,
  webRequest,
  type HeaderSnapshot,
} from './node-bridge.js';
export { decodeRequest, withoutEncoding } from './request-encoding.js';
export { checkWebhookOptions, type WebhookOptions } from './webhooks.js';
export type { Flow, StepsRouteOptions } from '../steps/types.js';
export { stepsRoute } from './steps-route.js';
