/**
 * `effectively-once/lambda`: AWS Lambda handlers for SQS event source mappings (with a
 * Middy middleware) and for HTTP behind API Gateway or a function URL. `@types/aws-lambda`
 * types them; `@middy/core` is an optional peer.
 * @packageDocumentation
 * @module effectively-once/lambda
 */
export { lambdaConsumer } from './consumer.js';
export type { LambdaConsumer } from './consumer.js';
export type { LambdaConsumerOptions, RecordKey } from './options.js';
export { lambdaConsumerMiddleware } from './middy.js';
export type { LambdaConsumerMiddleware } from './middy.js';
export { lambdaHttpHandler } from './http.js';
export type { LambdaHttpHandler, LambdaHttpOptions } from './http.js';
export type { LambdaHttpEvent } from './http-event.js';
