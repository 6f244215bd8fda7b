import type { PoolClient } from 'pg';
import { payloadHash } from '../src/consumer/hash.js';
import { BatchClaimStatements } from '../src/store/batch-claim.js';
import { ClaimStatements } from '../src/store/claim.js';
import { pgClaimSession } from '../src/tx/claim-connection.js';
import type { RunContext } from './context.js';
import { CONSUMER_NAME } from './db.js';
import { insertCharge, insertCharges } from './effect.js';
import { encodeMessage, newMessage, type BenchMessage } from './message.js';

interface Prepared {
  message: BenchMessage;
  payload: string;
}

/**
 * The key e and g claim: the one Kafka's b and c get from the idempotency header, so in
 * a dedup-growth run they land among the history's keys as b and c do.
 */
const keyOf = (message: BenchMessage): string => `msg-${message.id}`;

/** "Pre-fills" scenario e: the N messages exist in memory, all sent now. */
export function prepareInMemory(n: number): Prepared[] {
  const sentAt = Date.now();
  return Array.from({ length: n }, (_, id) => {
    const message = newMessage(id, sentAt);
    return { message, payload: encodeMessage(message) };
  });
}

/**
 * Scenario e, the database ceiling: the runner's own claim statement (the same
 * one-round-trip BEGIN + claim), the effect and COMMIT, from `concurrency` plain
 * loops, with no broker, no dispatcher and no events in between.
 */
export async function runDbCeiling(ctx: RunContext, prepared: readonly Prepared[]): Promise<void> {
  const claims = new ClaimStatements(
    { schema: ctx.dedupSchema, table: 'processed_messages' },
    undefined,
  );
  let next = 0;
  ctx.drain.start();
  const worker = async (): Promise<void> => {
    for (let i = next++; i < prepared.length; i = next++) {
      const { message, payload } = prepared[i]!;
      await inTransaction(ctx.pool, async (client) => {
        const { xid } = await claims.begin(
          pgClaimSession(client),
          CONSUMER_NAME,
          keyOf(message),
          payloadHash(payload, message),
          5000,
        );
        if (xid === null) throw new Error(`bench: key ${keyOf(message)} was already claimed`);
        await insertCharge(client, message);
      });
      ctx.drain.done(message.id);
    }
  };
  await Promise.all(Array.from({ length: ctx.concurrency }, worker));
}

/**
 * Scenario g, batch mode's database ceiling: `concurrency` loops, each transaction
 * claiming `batchSize` keys with the batch runner's own statement (BEGIN + one
 * `unnest` INSERT), applying them with one `unnest` INSERT and committing.
 */
export async function runDbBatchCeiling(
  ctx: RunContext,
  prepared: readonly Prepared[],
): Promise<void> {
  const claims = new BatchClaimStatements(
    { schema: ctx.dedupSchema, table: 'processed_messages' },
    undefined,
  );
  let next = 0;
  ctx.drain.start();
  const worker = async (): Promise<void> => {
    while (next < prepared.length) {
      const batch = prepared.slice(next, next + ctx.batchSize);
      next += batch.length;
      const items = batch.map(({ message, payload }) => ({
        key: keyOf(message),
        hash: payloadHash(payload, message),
      }));
      await inTransaction(ctx.pool, async (client) => {
        const { claimed } = await claims.begin(pgClaimSession(client), CONSUMER_NAME, items, 5000);
        if (claimed.size !== batch.length) throw new Error('bench: some keys were already claimed');
        await insertCharges(
          client,
          batch.map((p) => p.message),
        );
      });
      for (const { message } of batch) ctx.drain.done(message.id);
    }
  };
  await Promise.all(Array.from({ length: ctx.concurrency }, worker));
}

/**
 * Runs `work` on a pooled connection whose claim statement opened the transaction
 * (BEGIN is part of the claim), then COMMITs; on a throw, ROLLBACK and rethrow.
 */
async function inTransaction(
  pool: RunContext['pool'],
  work: (client: PoolClient) => Promise<void>,
): Promise<void> {
  const client = await pool.connect();
  try {
    await work(client);
    await client.query('COMMIT');
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  } finally {
    client.release();
  }
}
