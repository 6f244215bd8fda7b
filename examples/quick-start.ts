// The README's quick start, as a runnable file (`npx tsx examples/quick-start.ts`).
// Env: DATABASE_URL, QUEUE_URL, AWS_REGION (+ credentials), SQS_ENDPOINT for an emulator.
import { SQSClient } from '@aws-sdk/client-sqs';
import pg from 'pg';
import { createConsumer } from 'effectively-once';
import { sqsSource } from 'effectively-once/sqs';

interface OrderPlaced {
  orderId: string;
  totalCents: number;
}

const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL });
await pool.query('CREATE TABLE IF NOT EXISTS orders (id text, total_cents integer)');

const consumer = createConsumer<OrderPlaced>({
  name: 'orders', // dedup namespace: each consumer applies a message once
  pool, // the database that holds both the dedup table and your effects
  source: sqsSource<OrderPlaced>({
    client: new SQSClient({ endpoint: process.env.SQS_ENDPOINT }),
    queueUrl: process.env.QUEUE_URL!,
    key: 'Idempotency-Key', // one key per logical order, set by the producer
  }),
  handler: async (order, { tx }) => {
    // Written through tx: commits together with the claim on the key, or not at all.
    await tx.query('INSERT INTO orders (id, total_cents) VALUES ($1, $2)', [
      order.orderId,
      order.totalCents,
    ]);
  },
});

await consumer.start();
process.once('SIGTERM', () => void consumer.stop().then(() => pool.end()));
