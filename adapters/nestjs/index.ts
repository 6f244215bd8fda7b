/**
 * `effectively-once/nestjs`: the library as a Nest module. `EffectivelyOnceModule`
 * (`forRoot` / `forRootAsync`) holds the pool, the data layer and the doors' options;
 * consumers run with the application's lifecycle, their handlers provider methods
 * marked `@OnceHandler(name)`; routes marked `@Idempotent()` answer once per
 * `Idempotency-Key`, on Express and Fastify, with the claim's transaction as
 * `@ClaimTx()`. `@nestjs/common` and `@nestjs/core` 12 are optional peer dependencies.
 * @packageDocumentation
 * @module effectively-once/nestjs
 */
export { EffectivelyOnceModule, EffectivelyOnceModuleBase } from './module.js';
export { EffectivelyOnceConsumers } from './consumers.js';
export { OnceHandler, ONCE_HANDLER, type OnceHandlerMetadata } from './handler.js';
export { Idempotent, IdempotencyInterceptor } from './interceptor.js';
export { ClaimContext, ClaimTx, IDEMPOTENT_ROUTE, type IdempotentRouteOptions } from './claim.js';
export {
  EFFECTIVELY_ONCE_OPTIONS,
  IDEMPOTENCY,
  type EffectivelyOnceModuleOptions,
  type NestConsumerOptions,
  type NestIdempotencyOptions,
} from './options.js';
