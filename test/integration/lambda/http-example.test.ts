import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createIdempotency, type Idempotency } from 'effectively-once/http';
import { createOrdersEndpoint } from '../../../examples/lambda-http.js';
import { invocationContext } from '../../../kit/lambda/invoker.js';
import { createTestDatabase, type TestDatabase } from '../../helpers/db.js';
import { eventV1, eventV2 } from './http-events.js';

let db: TestDatabase;
let idempotency: Idempotency;

beforeAll(async () => {
  db = await createTestDatabase('lambda_http_example');
  await db.pool.query(
    `CREATE TABLE orders (order_id bigserial PRIMARY KEY, customer_id text NOT NULL, total_cents int NOT NULL)`,
  );
  idempotency = createIdempotency({ pool: db.pool, schema: db.schema, scope: 'anonymous' });
});
afterAll(async () => {
  await idempotency?.close();
  await db?.close();
});

describe('examples/lambda-http.ts', () => {
  it('books an order once per caller and key, through an HTTP API and a REST API event', async () => {
    const handler = createOrdersEndpoint(idempotency);
    const key = randomUUID();
    const call = {
      method: 'POST',
      path: '/orders',
      headers: [
        ['content-type', 'application/json'],
        ['idempotency-key', key],
      ] as Array<[string, string]>,
      body: JSON.stringify({ customerId: 'c1', totalCents: 350 }),
    };
    const context = () => invocationContext(Date.now() + 10_000);
    const first = await handler(eventV2(call), context());
    expect(first.statusCode).toBe(201);
    const retry = await handler(eventV1(call), context());
    expect(retry).toMatchObject({ statusCode: 201, body: first.body });
    // Another caller (the JWT authorizer's subject) with the same key: a request of its own.
    const v2 = eventV2(call);
    const otherCaller = {
      ...v2,
      requestContext: { ...v2.requestContext, authorizer: { jwt: { claims: { sub: 'u2' } } } },
    } as typeof v2;
    const theirs = await handler(otherCaller, context());
    expect(theirs.statusCode).toBe(201);
    expect(theirs.body).not.toBe(first.body);
    const { rows } = await db.pool.query('SELECT customer_id, total_cents FROM orders');
    expect(rows).toEqual([
      { customer_id: 'c1', total_cents: 350 },
      { customer_id: 'c1', total_cents: 350 },
    ]);
  }, 60_000);
});
