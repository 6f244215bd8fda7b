import type { BenchMessage } from './message.js';
import type { OpenedLayer } from '../kit/data-layers/index.js';
import { BENCH_SCHEMA } from './db.js';

/** Anything with pg's `query`: a Pool (autocommit) or a PoolClient inside a transaction. */
export interface Queryable {
  query(text: string, values?: unknown[]): Promise<unknown>;
}

/**
 * The effect every scenario applies: one row in `charges`. `created_at` is
 * `clock_timestamp()` (not `now()`, which is the transaction's start), so
 * `created_at - sent_at` is send → effect written, a round trip short of the commit.
 */
const INSERT_ONE =
  'INSERT INTO charges (message_id, amount_cents, sent_at) VALUES ($1, $2, to_timestamp($3::float8 / 1000))';

const INSERT_MANY = `INSERT INTO charges (message_id, amount_cents, sent_at)
  SELECT id, amount, to_timestamp(sent / 1000) FROM unnest($1::bigint[], $2::int[], $3::float8[]) AS u(id, amount, sent)`;

/** {@link INSERT_ONE} with the table named by its schema: a layer's connections have no search_path. */
const INSERT_ONE_QUALIFIED = INSERT_ONE.replace('INTO charges', `INTO ${BENCH_SCHEMA}.charges`);

/** The same effect written with a data layer's own raw call on its transaction object `tx`. */
export async function insertChargeThrough(
  data: OpenedLayer,
  tx: unknown,
  message: BenchMessage,
): Promise<void> {
  await data.exec(tx, INSERT_ONE_QUALIFIED, [message.id, message.amountCents, message.sentAt]);
}

export async function insertCharge(db: Queryable, message: BenchMessage): Promise<void> {
  await db.query(INSERT_ONE, [message.id, message.amountCents, message.sentAt]);
}

/** The batch form of the same effect: one statement for many messages. */
export async function insertCharges(
  db: Queryable,
  messages: readonly BenchMessage[],
): Promise<void> {
  if (messages.length === 0) return;
  await db.query(INSERT_MANY, [
    messages.map((m) => m.id),
    messages.map((m) => m.amountCents),
    messages.map((m) => m.sentAt),
  ]);
}
