import { setTimeout as sleep } from 'node:timers/promises';
import type { RunContext } from './context.js';
import { insertCharge, type Queryable } from './effect.js';
import { decodeMessage, type BenchMessage } from './message.js';

/** Scenario f, first half: the consumer stores the message (autocommit) and acks it. */
export async function storeInInbox(
  db: Queryable,
  message: BenchMessage,
  body: string,
): Promise<void> {
  await db.query(
    'INSERT INTO inbox (message_id, body) VALUES ($1, $2) ON CONFLICT (message_id) DO NOTHING',
    [message.id, body],
  );
}

/**
 * A message of scenario f is done when both halves are: the broker ack of the inbox
 * INSERT (delete / offset resolved) and the worker's COMMIT of the effect. Either can
 * come first; counting only the COMMIT would stop the clock before the broker caught up.
 */
export class InboxProgress {
  private readonly state: Uint8Array;
  constructor(private readonly ctx: RunContext) {
    this.state = new Uint8Array(ctx.messages);
  }
  acked(id: number): void {
    this.mark(id, 1);
  }
  committed(id: number): void {
    this.mark(id, 2);
  }
  private mark(id: number, bit: number): void {
    const next = (this.state[id] ?? 0) | bit;
    this.state[id] = next;
    if (next === 3) this.ctx.drain.done(id);
  }
}

/** Pause of a worker that found nothing to do; peers poll every 100 ms to 1 s, 5 ms is generous. */
const IDLE_POLL_MS = 5;

/**
 * Scenario f, second half: `concurrency` workers, each taking up to `inboxBatch`
 * pending rows with `FOR UPDATE SKIP LOCKED` in a transaction, running the effect per
 * row (the handler), marking the rows processed and committing. Runs until the drain
 * finished.
 */
export async function runInboxWorkers(ctx: RunContext, progress: InboxProgress): Promise<void> {
  const worker = async (): Promise<void> => {
    while (!ctx.drain.signal.aborted) {
      const done = await processInboxBatch(ctx);
      for (const m of done) progress.committed(m.id);
      if (done.length === 0) await sleep(IDLE_POLL_MS);
    }
  };
  await Promise.all(Array.from({ length: ctx.concurrency }, worker));
}

async function processInboxBatch(ctx: RunContext): Promise<BenchMessage[]> {
  const client = await ctx.pool.connect();
  try {
    await client.query('BEGIN');
    const { rows } = await client.query<{ message_id: string; body: string }>(
      `SELECT message_id, body FROM inbox WHERE processed_at IS NULL
        ORDER BY received_at LIMIT $1 FOR UPDATE SKIP LOCKED`,
      [ctx.inboxBatch],
    );
    if (rows.length === 0) {
      await client.query('ROLLBACK');
      return [];
    }
    const messages = rows.map((row) => decodeMessage(row.body));
    for (const message of messages) await insertCharge(client, message);
    await client.query(
      'UPDATE inbox SET processed_at = clock_timestamp() WHERE message_id = ANY($1::bigint[])',
      [rows.map((row) => row.message_id)],
    );
    await client.query('COMMIT');
    return messages;
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  } finally {
    client.release();
  }
}
