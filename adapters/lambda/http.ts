import type {
  APIGatewayProxyEvent,
  APIGatewayProxyEventV2,
  APIGatewayProxyResult,
  APIGatewayProxyStructuredResultV2,
  Context,
} from 'aws-lambda';
import type { PoolClient } from 'pg';
import type { IdempotentHandler } from '../../src/http/context.js';
import type { Idempotency, RequestOverrides } from '../../src/http/idempotency-types.js';
import { intOption } from '../../src/option-checks.js';
import { isPayloadV2, requestOf, type LambdaHttpEvent } from './http-event.js';
import { resultV1, resultV2 } from './http-result.js';

/** Options of {@link lambdaHttpHandler}: the endpoint's per-route overrides, and the margin. */
export interface LambdaHttpOptions extends Omit<
  RequestOverrides,
  'workDeadline' | 'webhook' | 'scope'
> {
  /**
   * The caller's scope (tenant) for this function's keys, instead of the endpoint's
   * `scope`: a string, or a function of the event, to read what API Gateway's authorizer
   * verified (`event.requestContext.authorizer`) rather than a header the client sets.
   */
  scope?: string | ((event: LambdaHttpEvent) => string);
  /**
   * Time kept free before the invocation's deadline
   * (`context.getRemainingTimeInMillis()`) for the COMMIT and the answer: the wait for
   * the key and the handler must end this long before it, or the request is rolled back
   * and answered 503 (retry with the same key). Default 1 000 ms.
   */
  deadlineMarginMs?: number;
}

/**
 * A Lambda function answering HTTP events. Its result has the payload version of its
 * event: 2.0 (HTTP API, function URLs) or 1.0 (REST API).
 */
export interface LambdaHttpHandler {
  /** An HTTP API (payload 2.0) or function URL event: cookies answered in `cookies`. */
  (event: APIGatewayProxyEventV2, context: Context): Promise<APIGatewayProxyStructuredResultV2>;
  /** A REST API (payload 1.0) event: cookies answered in `multiValueHeaders['set-cookie']`. */
  (event: APIGatewayProxyEvent, context: Context): Promise<APIGatewayProxyResult>;
}

/**
 * An idempotent endpoint as a Lambda function behind API Gateway (HTTP API payload 2.0,
 * REST API 1.0) or a function URL: the event becomes a web `Request`, `idempotency`
 * claims its `Idempotency-Key` in the transaction `handler` writes with, and the stored
 * `Response` (after the verified COMMIT) becomes the result. A retry of a committed
 * request gets the same status, stored headers and body bytes (binary and gzipped
 * bodies in base64); `Set-Cookie` is sent the first time only (never stored).
 *
 * The invocation's deadline, less `deadlineMarginMs`, bounds the wait for the key and the
 * handler, so the COMMIT is not cut by the function's timeout.
 *
 * ```ts
 * const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: 2 });
 * const idempotency = createIdempotency({ pool });
 * export const handler = lambdaHttpHandler(idempotency, async (request, { tx }) => {
 *   const { rows } = await tx.query('INSERT INTO orders (body) VALUES ($1) RETURNING id', [await request.text()]);
 *   return Response.json({ id: rows[0].id }, { status: 201 });
 * });
 * ```
 */
export function lambdaHttpHandler<Tx = PoolClient>(
  idempotency: Idempotency<Tx>,
  handler: IdempotentHandler<Tx>,
  options: LambdaHttpOptions = {},
): LambdaHttpHandler {
  const { deadlineMarginMs, scope, ...overrides } = options;
  const margin = intOption('deadlineMarginMs', deadlineMarginMs, 1_000, 0, 900_000);
  const run = async (
    event: LambdaHttpEvent,
    context: Context | undefined,
  ): Promise<APIGatewayProxyStructuredResultV2 | APIGatewayProxyResult> => {
    const request = requestOf(event);
    const remaining = context?.getRemainingTimeInMillis?.();
    const workDeadline =
      typeof remaining === 'number' && Number.isFinite(remaining)
        ? Date.now() + remaining - margin
        : undefined;
    const response = await idempotency.handle(request, handler, {
      ...overrides,
      ...(scope === undefined ? {} : { scope: typeof scope === 'string' ? scope : scope(event) }),
      ...(workDeadline !== undefined ? { workDeadline } : {}),
    });
    return isPayloadV2(event) ? resultV2(response) : resultV1(response);
  };
  return run as LambdaHttpHandler;
}
