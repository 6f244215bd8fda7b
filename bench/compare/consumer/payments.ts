/**
 * The effect every consumer contender applies, and where an armed message dies. The
 * business logic is the same everywhere: one `payments` row per message, written with
 * the pool (autocommit) by a plain worker and through `ctx.tx` by effectively-once.
 */
import type pg from 'pg';
import { emit } from '../../../kit/payments/child-protocol.js';

/** The effect's table and the crash points' bookkeeping, in the contender's schema. */
export const CONSUMER_TABLES = `
  CREATE TABLE payments (
    id           bigserial PRIMARY KEY,
    payment_key  text   NOT NULL,
    amount_cents bigint NOT NULL
  );
  CREATE TABLE compare_kills (payment_key text PRIMARY KEY)`;

/** A message's body. */
export interface PaymentMessage {
  key: string;
  amountCents: number;
}

/** The handler's one statement: no unique key on `payment_key`, as a plain INSERT of an event has none. */
export async function applyPayment(
  db: Pick<pg.Pool, 'query'>,
  body: string | undefined,
): Promise<void> {
  const { key, amountCents } = JSON.parse(body ?? '') as PaymentMessage;
  await db.query('INSERT INTO payments (payment_key, amount_cents) VALUES ($1, $2)', [
    key,
    amountCents,
  ]);
}

/**
 * Where an armed message dies: after its payment committed, before the library deletes
 * it (SQS) or commits its offset (Kafka). Each wiring calls `reached` once its handler
 * resolved. A redelivered armed message must not die again, or no worker could ever
 * get past it: the kill is recorded (autocommit) before it happens, once per key.
 */
export class MessageCrashPoint {
  constructor(private readonly pool: pg.Pool) {}

  async reached(key: string, armed: boolean): Promise<void> {
    emit({ t: 'committed', key });
    if (!armed) return;
    const { rowCount } = await this.pool.query(
      'INSERT INTO compare_kills (payment_key) VALUES ($1) ON CONFLICT DO NOTHING',
      [key],
    );
    // No cleanup, no goodbye: the process is gone with the payment committed.
    if (rowCount === 1) process.kill(process.pid, 'SIGKILL');
  }
}
