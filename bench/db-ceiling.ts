import { payloadHash } from 'effectively-once';
import { ClaimStatements } from '../src/store/claim.js';
import type { RunContext } from './context.js';
import { BENCH_SCHEMA, CONSUMER_NAME } from './db.js';
import { insertCharge } from './effect.js';
import { encodeMessage, newMessage, type BenchMessage } from './message.js';

interface Prepared {
  message: BenchMessage;
  payload: string;
}

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
  const claims = new ClaimStatements({ schema: BENCH_SCHEMA, table: 'processed_messages' });
  let next = 0;
  ctx.drain.start();
  const worker = async (): Promise<void> => {
    for (let i = next++; i < prepared.length; i = next++) {
      const { message, payload } = prepared[i]!;
      const client = await ctx.pool.connect();
      try {
        const claimed = await claims.begin(
          client,
          CONSUMER_NAME,
          `mem-${message.id}`,
          payloadHash(payload, message),
          5000,
        );
        if (!claimed) throw new Error(`bench: key mem-${message.id} was already claimed`);
        await insertCharge(client, message);
        await client.query('COMMIT');
      } catch (error) {
        await client.query('ROLLBACK').catch(() => undefined);
        throw error;
      } finally {
        client.release();
      }
      ctx.drain.done(message.id);
    }
  };
  await Promise.all(Array.from({ length: ctx.concurrency }, worker));
}
