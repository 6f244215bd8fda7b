/**
 * An AWS Lambda function answering `POST /orders` behind API Gateway (HTTP API or REST
 * API) or a function URL: the order's row commits with the stored answer under the
 * client's `Idempotency-Key`, so a client retrying after a timeout gets the same 201
 * and the same order, booked once.
 *
 * The pool, the endpoint and the handler live at module scope: Lambda keeps them across
 * invocations of one execution environment. Never end the pool in the handler.
 */
import pg from 'pg';
import { createIdempotency, type Idempotency } from 'effectively-once/http';
import {
  lambdaHttpHandler,
  type LambdaHttpEvent,
  type LambdaHttpHandler,
} from 'effectively-once/lambda';

/** The request body. */
export interface NewOrder {
  customerId: string;
  totalCents: number;
}

// #region handler
/** The function on `idempotency`; the module's own `handler` below is this on a pool of its own. */
export function createOrdersEndpoint(idempotency: Idempotency): LambdaHttpHandler {
  return lambdaHttpHandler(
    idempotency,
    async (request, { tx }) => {
      const order = (await request.json()) as NewOrder;
      const { rows } = await tx.query<{ order_id: string }>(
        'INSERT INTO orders (customer_id, total_cents) VALUES ($1, $2) RETURNING order_id',
        [order.customerId, order.totalCents],
      );
      return Response.json({ orderId: rows[0]!.order_id }, { status: 201 });
    },
    {
      // Keys are per caller: the subject API Gateway's JWT authorizer verified.
      scope: (event) => callerOf(event),
      // Kept free before the invocation's end for the COMMIT and the answer.
      deadlineMarginMs: 1_000,
    },
  );
}

/** The JWT authorizer's `sub` claim (HTTP API) or the REST authorizer's principal, else anonymous. */
function callerOf(event: LambdaHttpEvent): string {
  // A 2.0 event's context is typed without the authorizer that JWT routes add to it.
  const { authorizer } = event.requestContext as {
    authorizer?: { jwt?: { claims?: Record<string, unknown> }; principalId?: unknown };
  };
  const subject = authorizer?.jwt?.claims?.['sub'] ?? authorizer?.principalId;
  return typeof subject === 'string' && subject !== '' ? subject : 'anonymous';
}
// #endregion

/** What Lambda calls (handler setting `lambda-http.handler`), when DATABASE_URL is set. */
export const handler: LambdaHttpHandler | undefined =
  process.env['DATABASE_URL'] === undefined
    ? undefined
    : createOrdersEndpoint(
        createIdempotency({
          // Replaced per request by the function's `scope` above.
          scope: 'anonymous',
          // max 2: RDS Proxy or PgBouncer in transaction mode multiplexes the environments.
          pool: new pg.Pool({ connectionString: process.env['DATABASE_URL'], max: 2 }).on(
            'error',
            () => {
              // An idle connection dropped while the environment was frozen: the pool replaces it.
            },
          ),
        }),
      );
