/**
 * An AWS Lambda function behind an SQS event source mapping: each order inserts a row
 * and credits the customer's total through `ctx.tx`, so an order is booked once however
 * often SQS delivers it. The mapping needs `FunctionResponseTypes: ['ReportBatchItemFailures']`.
 *
 * The pool and the handler live at module scope: Lambda keeps them across invocations of
 * one execution environment. Never end the pool in the handler.
 */
import pg from 'pg';
import type { SQSRecord } from 'aws-lambda';
import { lambdaConsumer, type LambdaConsumer } from 'effectively-once/lambda';

/** The message body: one order, keyed by the producer's `Idempotency-Key` attribute. */
export interface OrderPlaced {
  orderId: string;
  customerId: string;
  totalCents: number;
}

// #region handler
/** The handler on `pool`; the module's own `handler` below is this on a pool of its own. */
export function createOrdersHandler(pool: pg.Pool, schema?: string): LambdaConsumer {
  return lambdaConsumer({
    name: 'orders',
    pool,
    ...(schema !== undefined ? { schema } : {}),
    key: 'Idempotency-Key',
    // A small pool per environment: one record at a time, one connection spare.
    concurrency: 1,
    handler: async (record: SQSRecord, { tx }) => {
      const order = JSON.parse(record.body) as OrderPlaced;
      await tx.query(
        'INSERT INTO orders (order_id, customer_id, total_cents) VALUES ($1, $2, $3)',
        [order.orderId, order.customerId, order.totalCents],
      );
      await tx.query(
        `INSERT INTO customer_totals (customer_id, total_cents) VALUES ($1, $2)
         ON CONFLICT (customer_id) DO UPDATE SET total_cents = customer_totals.total_cents + $2`,
        [order.customerId, order.totalCents],
      );
    },
  });
}
// #endregion

/** What Lambda calls (handler setting `lambda-sqs.handler`), when DATABASE_URL is set. */
export const handler: LambdaConsumer | undefined =
  process.env['DATABASE_URL'] === undefined
    ? undefined
    : createOrdersHandler(
        // max 2: RDS Proxy or PgBouncer in transaction mode multiplexes the environments.
        new pg.Pool({ connectionString: process.env['DATABASE_URL'], max: 2 }).on('error', () => {
          // An idle connection dropped while the environment was frozen: the pool replaces it.
        }),
      );
