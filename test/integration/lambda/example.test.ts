import { describe, expect, it } from '@jest/globals';
import { createOrdersHandler } from '../../../examples/lambda-sqs.js';
import { InProcessInvoker } from '../../../kit/lambda/invoker.js';
import { TIMEOUT, lambdaIntegration } from './harness.js';

const it_ = lambdaIntegration('example');

describe('examples/lambda-sqs.ts', () => {
  it(
    'books each order once, however often it is sent',
    async () => {
      await it_.db.pool.query(
        `CREATE TABLE orders (order_id text PRIMARY KEY, customer_id text NOT NULL, total_cents int NOT NULL);
         CREATE TABLE customer_totals (customer_id text PRIMARY KEY, total_cents int NOT NULL)`,
      );
      const { url } = await it_.queues.create('lambda-example', { visibilityTimeout: 1 });
      const orders = [
        { orderId: 'o1', customerId: 'c1', totalCents: 100 },
        { orderId: 'o2', customerId: 'c1', totalCents: 250 },
      ];
      for (const order of [...orders, orders[0]!, orders[1]!])
        await it_.queues.send(url, JSON.stringify(order), {
          MessageAttributes: {
            'Idempotency-Key': { DataType: 'String', StringValue: order.orderId },
          },
        });
      const handler = createOrdersHandler(it_.db.pool, it_.db.schema);
      it_.mapping({ queueUrl: url, invoker: new InProcessInvoker(handler), batchSize: 10 });
      await it_.drained(url);
      const { rows } = await it_.db.pool.query<{ total_cents: number }>(
        'SELECT total_cents FROM customer_totals',
      );
      expect(rows).toEqual([{ total_cents: 350 }]);
      expect(handler.consumer.stats()).toMatchObject({ processed: 2, duplicates: 2 });
    },
    TIMEOUT,
  );
});
