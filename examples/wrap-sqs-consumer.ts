/**
 * Wrapping an existing sqs-consumer worker. The app keeps its `Consumer.create(...)`
 * and its handler's shape; `withDedup` adds the claim and hands the handler a
 * transaction (`ctx.tx`). sqs-consumer deletes a message only when its effect
 * committed or it was a duplicate; otherwise the message stays for a retry.
 *
 *   DATABASE_URL=postgres://… QUEUE_URL=http://localhost:4566/000000000000/invoices \
 *   SQS_ENDPOINT=http://localhost:4566 npx tsx examples/wrap-sqs-consumer.ts
 */
import { pathToFileURL } from 'node:url';
import { SQSClient, type Message } from '@aws-sdk/client-sqs';
import pg from 'pg';
import { Consumer } from 'sqs-consumer';
import type { HandlerContext } from 'effectively-once';
import { withDedup } from 'effectively-once/sqs';

/** The message body. */
export interface InvoiceIssued {
  invoiceId: string;
  customerId: string;
  amountCents: number;
}

// #region handler
/**
 * The app's handler as it was, plus `ctx`: instead of `pool.query(...)` it writes
 * through `ctx.tx`. Before wrapping it was `async (message) => { ...; return message; }`.
 */
async function handleInvoice(message: Message, { tx }: HandlerContext<Message>): Promise<void> {
  const invoice = JSON.parse(message.Body ?? '') as InvoiceIssued;
  await tx.query(
    'INSERT INTO invoices (invoice_id, customer_id, amount_cents) VALUES ($1, $2, $3)',
    [invoice.invoiceId, invoice.customerId, invoice.amountCents],
  );
}
// #endregion

export interface WorkerOptions {
  /** Stop when this aborts. Run directly, SIGINT and SIGTERM abort it. */
  signal: AbortSignal;
  /** Where the endpoints come from. Default `process.env`. */
  env?: NodeJS.ProcessEnv;
}

/** Runs the sqs-consumer app until `signal` aborts, then stops both layers. */
export async function main({ signal, env = process.env }: WorkerOptions): Promise<void> {
  const queueUrl = required(env, 'QUEUE_URL');
  const pool = new pg.Pool({ connectionString: required(env, 'DATABASE_URL') });
  const sqs = new SQSClient({
    region: env.AWS_REGION ?? 'us-east-1',
    ...(env.SQS_ENDPOINT
      ? {
          endpoint: env.SQS_ENDPOINT,
          credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
        }
      : {}),
  });
  await pool.query(
    'CREATE TABLE IF NOT EXISTS invoices (invoice_id text NOT NULL, customer_id text NOT NULL, amount_cents integer NOT NULL)',
  );

  // #region wrap
  const dedup = withDedup(handleInvoice, {
    name: 'invoices',
    pool,
    key: 'Idempotency-Key',
    // Lets retries back off with ChangeMessageVisibility instead of waiting out the timeout.
    client: sqs,
    queueUrl,
  });
  dedup.consumer.on('duplicate', ({ key }) => console.log(`invoice ${key}: duplicate, deleted`));
  await dedup.start();

  const app = Consumer.create({
    queueUrl,
    sqs,
    handleMessage: (message) => dedup.handleMessage(message),
    // The key attribute and the receive count (the attempt number) must be requested.
    messageAttributeNames: ['Idempotency-Key'],
    messageSystemAttributeNames: ['All'],
    batchSize: 10,
    waitTimeSeconds: 1,
    pollingCompleteWaitTimeMs: 30_000,
  });
  app.on('processing_error', (error) =>
    console.error(`invoice not processed (will retry): ${error.message}`),
  );
  app.on('error', (error) => console.error(`sqs-consumer: ${error.message}`));
  // #endregion
  const stopped = new Promise<void>((resolve) => app.once('stopped', () => resolve()));
  app.start();

  await new Promise<void>((resolve) => {
    if (signal.aborted) resolve();
    else signal.addEventListener('abort', () => resolve(), { once: true });
  });
  app.stop(); // finish in-flight messages, then 'stopped'
  await stopped;
  await dedup.stop();
  sqs.destroy();
  await pool.end();
}

function required(env: NodeJS.ProcessEnv, name: string): string {
  const value = env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const stop = new AbortController();
  process.once('SIGINT', () => stop.abort());
  process.once('SIGTERM', () => stop.abort());
  await main({ signal: stop.signal });
}
