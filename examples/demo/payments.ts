import type { Pool } from 'pg';
import type { HandlerContext } from 'effectively-once';
import { FAULTS, isSlow, sleep } from './faults.js';

/** One logical charge, as the producer sends it (the body is byte-identical on every resend). */
export interface Charge {
  chargeId: string;
  account: string;
  amountCents: number;
  currency: 'EUR';
}

/** Name of the SQS message attribute that carries the producer's idempotency key. */
export const IDEMPOTENCY_KEY = 'Idempotency-Key';

/** Accounts the charges are spread over. */
export const ACCOUNTS = Array.from(
  { length: 25 },
  (_, i) => `acct_${String(i + 1).padStart(2, '0')}`,
);

/**
 * The payment service's own tables. `charges` deliberately has NO unique constraint on
 * `charge_id`, and the balance update is not idempotent: if a charge were applied twice
 * the demo would see it. Only the dedup claim keeps it single.
 */
export async function createPaymentTables(pool: Pool): Promise<void> {
  await pool.query(`
    CREATE TABLE IF NOT EXISTS accounts (
      id            text   PRIMARY KEY,
      balance_cents bigint NOT NULL DEFAULT 0
    );
    CREATE TABLE IF NOT EXISTS charges (
      id           bigserial   PRIMARY KEY,
      charge_id    text        NOT NULL,
      account      text        NOT NULL REFERENCES accounts (id),
      amount_cents integer     NOT NULL,
      worker       text        NOT NULL,
      charged_at   timestamptz NOT NULL DEFAULT now()
    )`);
  await pool.query('INSERT INTO accounts (id) SELECT unnest($1::text[]) ON CONFLICT DO NOTHING', [
    ACCOUNTS,
  ]);
}

/**
 * The handler every worker runs: book the charge and debit the account, both through
 * `ctx.tx`, the transaction that also holds the claim on the charge's key.
 */
export function chargeHandler(worker: string) {
  return async (charge: Charge, { tx, signal }: HandlerContext<Charge>): Promise<void> => {
    const [min, max] = FAULTS.handlerMs;
    // The card network: usually quick, sometimes slower than the visibility timeout.
    await sleep(
      isSlow(charge.chargeId) ? FAULTS.slowHandlerMs : min + Math.random() * (max - min),
      signal,
    );
    signal.throwIfAborted();
    await tx.query(
      'INSERT INTO charges (charge_id, account, amount_cents, worker) VALUES ($1, $2, $3, $4)',
      [charge.chargeId, charge.account, charge.amountCents, worker],
    );
    await tx.query('UPDATE accounts SET balance_cents = balance_cents - $2 WHERE id = $1', [
      charge.account,
      charge.amountCents,
    ]);
  };
}
