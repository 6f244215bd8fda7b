/**
 * The Idempotency-Key interceptor: the route handler (with its pipes and the
 * interceptors inside this one) runs as the web core's handler, inside the key's claim
 * transaction; its value becomes the stored answer (answer.ts); the transaction is
 * driven and ended by the core's one driver (src/tx/drive.ts) when the handler's work
 * is done; and only after the verified COMMIT does the interceptor hand Nest a web
 * Response to send. A replay, a problem answer (409, 422, 503) and the handler's own
 * answer all leave the same way. A handler that throws (an HttpException, a pipe's
 * validation error) rolls back, nothing stored, and the error goes to Nest's
 * exception filters as usual.
 */
import { applyDecorators, Inject, Injectable, SetMetadata, UseInterceptors } from '@nestjs/common';
import type { CallHandler, ExecutionContext, NestInterceptor } from '@nestjs/common';
import { RESPONSE_PASSTHROUGH_METADATA, ROUTE_ARGS_METADATA } from '@nestjs/common/constants.js';
import { from, lastValueFrom, type Observable } from 'rxjs';
import { ConfigurationError } from '../../src/errors.js';
import {
  executeBuffered,
  hooksOf,
  knownBytes,
  nodeRequestHead,
  webRequest,
  type BufferedExecutor,
  type Execution,
  type Idempotency,
  type IdempotencyContext,
  type RequestOverrides,
} from '../../src/http/framework-kit.js';
import { answerOf } from './answer.js';
import { IDEMPOTENT_ROUTE, setClaim, type IdempotentRouteOptions } from './claim.js';
import { IDEMPOTENCY } from './options.js';
import {
  requestParts,
  restore,
  snapshot,
  type PlatformRequest,
  type PlatformResponse,
} from './platform.js';

/** Nest's RouteParamtypes.RESPONSE and .NEXT: a handler that answers by itself. */
const ANSWERS_ITSELF = new Set(['1', '2']);

/**
 * Makes a route idempotent under its `Idempotency-Key` (see `Idempotent()`, which
 * applies it). Needs `EffectivelyOnceModule` with `http` options, and the application
 * created with `rawBody: true`.
 */
export class IdempotencyInterceptor implements NestInterceptor {
  /** @internal Built by Nest, the module's Idempotency injected by token. */
  constructor(private readonly idempotency: Idempotency<unknown> | null) {}

  /** Nest's interceptor hook. */
  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    if (context.getType() !== 'http') return next.handle();
    return from(this.run(context, next));
  }

  private async run(context: ExecutionContext, next: CallHandler): Promise<unknown> {
    const idempotency = this.idempotency;
    if (idempotency === null)
      throw new ConfigurationError(
        '@Idempotent()',
        'EffectivelyOnceModule has no `http` options: give them to use idempotent routes',
      );
    refuseOwnAnswer(context);
    const http = context.switchToHttp();
    const req = http.getRequest<PlatformRequest>();
    const res = http.getResponse<PlatformResponse>();
    const parts = requestParts(req);
    const options = routeOptions(context);
    const overrides: RequestOverrides = {};
    if (options.scope !== undefined) overrides.scope = await options.scope(req);
    if (options.route !== undefined) overrides.route = options.route(req);
    else if (parts.routeTemplate !== undefined) overrides.routeTemplate = parts.routeTemplate;
    // Status and headers as Nest set them for the route (@HttpCode, @Header), before it ran.
    const head = snapshot(res);
    const handler = async (ctx: IdempotencyContext<unknown>): Promise<Response> => {
      // A run after a serialization failure starts from the route's head again.
      restore(res, head);
      setClaim(req, ctx);
      try {
        // Each subscription runs the route handler afresh (pipes, parameters included).
        const value: unknown = await lastValueFrom<unknown, undefined>(next.handle(), {
          defaultValue: undefined,
        });
        // The work is done: the transaction is the core's to end, now.
        hooksOf(ctx).workDone();
        return answerOf(value, snapshot(res), parts.fastify);
      } finally {
        setClaim(req, undefined);
      }
    };
    const execution: Execution = isBufferedExecutor(idempotency)
      ? await idempotency[executeBuffered](
          nodeRequestHead(parts.url, parts.method, parts.headers),
          parts.body,
          handler,
          overrides,
        )
      : await idempotency.execute(
          webRequest(parts.url, parts.method, parts.headers, parts.body),
          (_request, ctx) => handler(ctx),
          overrides,
        );
    // Committed (or refused, rolled back, replayed): only now may anything be sent.
    restore(res, head);
    if (execution.kind === 'threw') throw execution.error;
    return sendable(execution.response);
  }
}

Injectable()(IdempotencyInterceptor);
Inject(IDEMPOTENCY)(IdempotencyInterceptor, undefined, 0);

/**
 * Makes a route idempotent under its `Idempotency-Key`: the handler runs inside the
 * key's claim transaction (`@ClaimTx()`), its returned value is stored with the effect,
 * and the answer is sent only after the verified COMMIT; a retry with the key gets the
 * stored answer (`Idempotent-Replayed: true`), a concurrent one waits for it (or 409,
 * per `http.concurrent`), one with another body 422. A thrown HttpException rolls back,
 * unstored. Needs the application created with `rawBody: true`. On a controller class:
 * every route of it.
 *
 * ```ts
 * @Post('charges')
 * @Idempotent()
 * charge(@Body() body: ChargeDto, @ClaimTx() tx: PoolClient) { … return row; }
 * ```
 */
export function Idempotent(options: IdempotentRouteOptions = {}): MethodDecorator & ClassDecorator {
  return applyDecorators(
    SetMetadata(IDEMPOTENT_ROUTE, options),
    UseInterceptors(IdempotencyInterceptor),
  );
}

/**
 * A Response Nest can send: one the library built around bytes it holds may carry them
 * beside a bodyless Response (known-body.ts), so it is rebuilt with them as its body.
 */
function sendable(response: Response): Response {
  const bytes = knownBytes(response);
  if (bytes === undefined || response.body !== null) return response;
  return new Response(bytes, {
    status: response.status,
    statusText: response.statusText,
    headers: response.headers,
  });
}

function routeOptions(context: ExecutionContext): IdempotentRouteOptions {
  const own = Reflect.getMetadata(IDEMPOTENT_ROUTE, context.getHandler()) as
    IdempotentRouteOptions | undefined;
  const shared = Reflect.getMetadata(IDEMPOTENT_ROUTE, context.getClass()) as
    IdempotentRouteOptions | undefined;
  return own ?? shared ?? {};
}

/**
 * A handler with `@Res()` or `@Next()` (no passthrough) answers by itself, so its
 * answer would leave before COMMIT: refused, before anything is claimed.
 */
function refuseOwnAnswer(context: ExecutionContext): void {
  const owner = context.getClass();
  const method = context.getHandler().name;
  const args = (Reflect.getMetadata(ROUTE_ARGS_METADATA, owner, method) ?? {}) as Record<
    string,
    unknown
  >;
  const answersItself = Object.keys(args).some((key) => ANSWERS_ITSELF.has(key.split(':')[0]!));
  if (!answersItself) return;
  if (Reflect.getMetadata(RESPONSE_PASSTHROUGH_METADATA, owner, method) === true) return;
  throw new ConfigurationError(
    `${owner.name}.${method}`,
    'an @Idempotent() route must return its answer (or use @Res({ passthrough: true })): ' +
      'an answer written to @Res() would leave before the COMMIT',
  );
}

function isBufferedExecutor(
  idempotency: Idempotency<unknown>,
): idempotency is Idempotency<unknown> & BufferedExecutor<unknown> {
  return typeof (idempotency as Partial<BufferedExecutor>)[executeBuffered] === 'function';
}
