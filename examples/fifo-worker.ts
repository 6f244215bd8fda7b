/**
 * A FIFO worker: ledger postings per account must apply in order and once. The queue
 * is FIFO with one `MessageGroupId` per account, so postings of an account arrive in
 * order and run one at a time (other accounts run in parallel). The dedup key is the
 * producer's `MessageDeduplicationId` (the adapter's FIFO default), e.g. `acct-7:42`:
 * SQS drops a repeat within 5 minutes, the claim drops it forever after (as long as the
 * dedup window keeps the key), including redeliveries after a crash.
 *
 *   DATABASE_URL=postgres://… QUEUE_URL=http://localhost:4566/000000000000/ledger.fifo \
 *   SQS_ENDPOINT=http://localhost:4566 npx tsx examples/fifo-worker.ts
 */
import { pathToFileURL } from 'node:url';
import { SQSClient } from '@aws-sdk/client-sqs';
import pg from 'pg';
import { createConsumer } from 'effectively-once';
import { sqsSource } from 'effectively-once/sqs';

/** One posting; `seq` counts the account's postings from 1. */
export interface Posting {
  accountId: string;
  seq: number;
  amountCents: number;
}

export interface WorkerOptions {
  /** Stop when this aborts. Run directly, SIGINT and SIGTERM abort it. */
  signal: AbortSignal;
  /** Where the endpoints come from. Default `process.env`. */
  env?: NodeJS.ProcessEnv;
}

/** Runs the worker until `signal` aborts, then stops it cleanly. */
export async function main({ signal, env = process.env }: WorkerOptions): Promise<void> {
  const queueUrl = required(env, 'QUEUE_URL');
  if (!queueUrl.endsWith('.fifo'))
    throw new Error('QUEUE_URL must name a FIFO queue (…/name.fifo)');
  const pool = new pg.Pool({ connectionString: required(env, 'DATABASE_URL') });
  const client = new SQSClient({
    region: env.AWS_REGION ?? 'us-east-1',
    ...(env.SQS_ENDPOINT
      ? {
          endpoint: env.SQS_ENDPOINT,
          credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
        }
      : {}),
  });
  await pool.query(`
    CREATE TABLE IF NOT EXISTS ledger_accounts (
      id            text    PRIMARY KEY,
      balance_cents bigint  NOT NULL DEFAULT 0,
      last_seq      integer NOT NULL DEFAULT 0
    );
    CREATE TABLE IF NOT EXISTS ledger_postings (
      account_id   text    NOT NULL,
      seq          integer NOT NULL,
      amount_cents integer NOT NULL
    )`);

  // #region consumer
  const consumer = createConsumer<Posting>({
    name: 'ledger',
    pool,
    concurrency: 10, // up to 10 accounts at once; one posting per account at a time
    source: sqsSource<Posting>({ client, queueUrl }),
    handler: async (posting, { tx }) => {
      await tx.query('INSERT INTO ledger_accounts (id) VALUES ($1) ON CONFLICT DO NOTHING', [
        posting.accountId,
      ]);
      const { rows } = await tx.query<{ last_seq: number }>(
        'SELECT last_seq FROM ledger_accounts WHERE id = $1 FOR UPDATE',
        [posting.accountId],
      );
      const last = rows[0]?.last_seq ?? 0;
      // FIFO keeps the order; this check makes a broken producer visible instead of silent.
      if (posting.seq !== last + 1)
        throw new Error(`account ${posting.accountId}: got seq ${posting.seq} after ${last}`);
      await tx.query(
        'INSERT INTO ledger_postings (account_id, seq, amount_cents) VALUES ($1, $2, $3)',
        [posting.accountId, posting.seq, posting.amountCents],
      );
      await tx.query(
        'UPDATE ledger_accounts SET balance_cents = balance_cents + $2, last_seq = $3 WHERE id = $1',
        [posting.accountId, posting.amountCents, posting.seq],
      );
    },
  });
  // #endregion
  consumer.on('error', (error) => console.error(`ledger worker: ${error.message}`));

  await consumer.start();
  await new Promise<void>((resolve) => {
    if (signal.aborted) resolve();
    else signal.addEventListener('abort', () => resolve(), { once: true });
  });
  await consumer.stop({ timeoutMs: 30_000 });
  client.destroy();
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
