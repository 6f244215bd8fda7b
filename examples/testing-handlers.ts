/**
 * Testing a handler with `memorySource()` (from `effectively-once/testing`) and a real
 * Postgres: no broker, but the broker's failure modes on demand. The same steps fit in
 * a jest or node:test test body; this file runs them as a script and exits non-zero
 * when a check fails.
 *
 *   DATABASE_URL=postgres://… npx tsx examples/testing-handlers.ts
 */
import { pathToFileURL } from 'node:url';
import pg from 'pg';
import { createConsumer, type HandlerContext } from 'effectively-once';
import { memorySource } from 'effectively-once/testing';

/** The message body. */
export interface Deposit {
  accountId: string;
  amountCents: number;
}

/** The handler under test, as the application defines it. */
export async function applyDeposit(deposit: Deposit, { tx }: HandlerContext<Deposit>) {
  await tx.query(
    `INSERT INTO balances (account_id, cents) VALUES ($1, $2)
     ON CONFLICT (account_id) DO UPDATE SET cents = balances.cents + EXCLUDED.cents`,
    [deposit.accountId, deposit.amountCents],
  );
}

/** Runs the checks against `DATABASE_URL`; rejects when one fails. */
export async function main({ env = process.env }: { env?: NodeJS.ProcessEnv } = {}) {
  const pool = new pg.Pool({ connectionString: env.DATABASE_URL });
  try {
    await pool.query(
      'CREATE TABLE IF NOT EXISTS balances (account_id text PRIMARY KEY, cents bigint NOT NULL)',
    );
    // #region test
    const source = memorySource<Deposit>();
    const consumer = createConsumer({ name: 'deposits', pool, source, handler: applyDeposit });
    await consumer.start();

    const deposit = { accountId: 'acct-1', amountCents: 500 };
    source.loseNextAcks(1); // a crash after COMMIT, before the ack: the message comes back
    source.send(deposit, { key: 'deposit-1' });
    source.send(deposit, { key: 'deposit-1' }); // the producer resent it
    while (source.outstanding > 0) await new Promise((r) => setTimeout(r, 10));
    await consumer.stop();

    const { rows } = await pool.query<{ cents: string }>(
      "SELECT cents FROM balances WHERE account_id = 'acct-1'",
    );
    if (rows[0]?.cents !== '500') throw new Error(`expected 500 cents, got ${rows[0]?.cents}`);
    if (consumer.stats().duplicates !== 2) throw new Error('expected two duplicates');
    // #endregion
  } finally {
    await pool.end();
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  await main();
  console.log('testing-handlers: the deposit was applied once');
}
