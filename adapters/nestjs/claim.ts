/**
 * The claim of an `@Idempotent()` route's run, on its request, and the parameter
 * decorators that hand it to the handler: `@ClaimTx()`, `@ClaimContext()`. Parameters, not a
 * request-scoped provider: Nest resolves a request-scoped provider when it builds the
 * request's controller, before the interceptor has claimed anything, and a run after a
 * serialization failure gets a new transaction; a parameter is read on every run.
 */
import { createParamDecorator } from '@nestjs/common';
import type { ExecutionContext } from '@nestjs/common';
import { ConfigurationError } from '../../src/errors.js';
import type { IdempotencyContext } from '../../src/http/context.js';

/** Per-route options of {@link Idempotent}. */
export interface IdempotentRouteOptions {
  /**
   * The key's scope from the platform's request (`req.user.tenantId`), instead of the
   * module's `http.scope`. The request is the platform's (Express's or Fastify's).
   */
  scope?(req: unknown): string | Promise<string>;
  /** The route a key is bound to, instead of the URL's path. */
  route?(req: unknown): string;
}

/** The metadata key of an `@Idempotent()` route's options. */
export const IDEMPOTENT_ROUTE = 'effectively-once:idempotent-route';

const CLAIM = Symbol('effectively-once:claim');

type WithClaim = { [CLAIM]?: IdempotencyContext<unknown> };

/** Puts the run's context on the request for the parameter decorators (or takes it off). */
export function setClaim(req: object, ctx: IdempotencyContext<unknown> | undefined): void {
  (req as WithClaim)[CLAIM] = ctx;
}

/** The running claim of `req`; throws outside an `@Idempotent()` route's run. */
export function claimOf<Tx>(req: object): IdempotencyContext<Tx> {
  const ctx = (req as WithClaim)[CLAIM];
  if (ctx === undefined)
    throw new ConfigurationError(
      '@ClaimTx()',
      'is only available to the handler of an @Idempotent() route, while it runs',
    );
  return ctx as IdempotencyContext<Tx>;
}

/**
 * The claim's open transaction, as a route handler parameter: a pg client, or the
 * module's data layer's transaction object (a Prisma transaction client, a TypeORM
 * EntityManager). Write the effect through it; do not end it.
 */
export const ClaimTx = createParamDecorator(
  (_data: unknown, context: ExecutionContext): unknown =>
    claimOf(context.switchToHttp().getRequest<object>()).tx,
);

/** The whole claim context (`tx`, `key`, `scope`, `signal`, `attempt`), as a route handler parameter. */
export const ClaimContext = createParamDecorator(
  (_data: unknown, context: ExecutionContext): IdempotencyContext<unknown> =>
    claimOf(context.switchToHttp().getRequest<object>()),
);
