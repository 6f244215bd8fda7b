/**
 * The two services of the outbox run, as handlers: A applies an operation and enqueues
 * its outbox row; B applies the row downstream. B's HTTP receiver is receiver.ts.
 */
import type pg from 'pg';
import { enqueue } from 'effectively-once/outbox';
import { sleep } from '../../src/sleep.js';
import {
  destinationOf,
  outboxTables,
  type Downstream,
  type Operation,
  type OutboxNodeConfig,
} from './shared.js';

/**
 * Service A, in one transaction: the outbox row first (which takes the account's key
 * lock), a random pause, then the account's next sequence number (a row lock held
 * until COMMIT, so the numbers rise in commit order) and A's effect. The pause keeps
 * the transactions of a hot account overlapping: without the key lock (the
 * `enqueue-order` control) their rows' places in line would follow enqueue order, and
 * the sequence numbers commit order.
 */
export function serviceA(cfg: OutboxNodeConfig) {
  const t = outboxTables(cfg.schema);
  return async (body: Operation, tx: pg.PoolClient): Promise<void> => {
    const downstream: Downstream = {
      op: body.op,
      account: body.account,
      ...(body.poison === true ? { poison: true } : {}),
    };
    await enqueue(
      tx,
      {
        destination: destinationOf(body.account),
        payload: downstream,
        ...(cfg.control === 'unordered' ? {} : { orderingKey: body.account }),
      },
      { schema: cfg.schema, order: cfg.control === 'enqueue-order' ? 'enqueue' : 'commit' },
    );
    if (cfg.hotDelayMs > 0) await sleep(Math.floor(Math.random() * (cfg.hotDelayMs + 1)));
    const { rows } = await tx.query<{ seq: number }>(
      `INSERT INTO ${t.accounts} (account, seq) VALUES ($1, 1)
       ON CONFLICT (account) DO UPDATE SET seq = ${t.accounts}.seq + 1 RETURNING seq`,
      [body.account],
    );
    const seq = rows[0]?.seq;
    if (seq === undefined) throw new Error('no sequence number returned');
    await tx.query(`INSERT INTO ${t.aEffects} (op, account, seq, pid) VALUES ($1, $2, $3, $4)`, [
      body.op,
      body.account,
      seq,
      process.pid,
    ]);
  };
}

/** Service B: the downstream effect, keyed by the outbox id the record carries. */
export function serviceB(cfg: OutboxNodeConfig) {
  const t = outboxTables(cfg.schema);
  return async (body: Downstream, tx: pg.PoolClient, key: string): Promise<void> => {
    await tx.query(
      `INSERT INTO ${t.bApplied} (op, account, outbox_id, pid) VALUES ($1, $2, $3, $4)`,
      [body.op, body.account, key, process.pid],
    );
  };
}
