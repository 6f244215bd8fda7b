import { createConsumer, type ConsumerOptions, type Source } from 'effectively-once';
import type { RunContext } from './context.js';
import { CONSUMER_NAME } from './db.js';
import { insertCharge, insertChargeThrough, insertCharges } from './effect.js';
import type { BenchMessage } from './message.js';
import { observedSource } from './observed-source.js';
import { PRUNE_WHILE_CONSUMING, recordPrunes } from './pruning.js';

/** How long a drain may make no progress before the run is declared stuck. */
export const STALL_MS = 60_000;

/**
 * Scenarios b and c: `createConsumer` over the broker's source, the effect through
 * `ctx.tx`. `per-message`: one transaction per message (b); `batch`: batch mode with
 * `batchHandler` and one unnest INSERT per batch (c). Resolves once drained and stopped.
 */
export async function runEffectivelyOnce(
  ctx: RunContext,
  source: Source<BenchMessage>,
  mode: 'per-message' | 'batch',
): Promise<void> {
  // Where a delivery's time goes: in the runner overall (claim, handler, commit, ack)
  // versus in the handler + COMMIT part ('processed' events' durationMs).
  const started = new WeakMap<object, number>();
  let settledMs = 0;
  let settled = 0;
  let txMs = 0;
  let txCount = 0;
  let batches = 0;
  let batchItems = 0;
  const observed = observedSource(source, {
    onDeliver: (delivery) => {
      ctx.drain.start();
      started.set(delivery, performance.now());
    },
    onSettled: (delivery, outcome) => {
      settledMs += performance.now() - (started.get(delivery) ?? NaN);
      settled++;
      if (outcome === 'processed' || outcome === 'duplicate') ctx.drain.done(delivery.body.id);
      else if (!ctx.drain.signal.aborted)
        ctx.drain.fail(new Error(`bench: delivery ${delivery.key} settled as ${outcome}`));
    },
  });
  const common: Omit<ConsumerOptions<BenchMessage>, 'handler' | 'batchHandler'> = {
    name: CONSUMER_NAME,
    source: observed,
    pool: ctx.pool,
    schema: ctx.dedupSchema,
    concurrency: ctx.consumerConcurrency,
    migrate: false,
    ...(ctx.pruning ? { retention: PRUNE_WHILE_CONSUMING } : {}),
  };
  const prunes = ctx.pruning ? recordPrunes(ctx.pool) : [];
  const data = ctx.dataLayer;
  if (data !== undefined && mode !== 'per-message')
    throw new Error('bench: a data layer runs per message (b) only');
  const consumer =
    data !== undefined
      ? createConsumer<BenchMessage, unknown>({
          ...common,
          dataLayer: data.layer,
          handler: (message, { tx }) => insertChargeThrough(data, tx, message),
        })
      : mode === 'per-message'
        ? createConsumer<BenchMessage>({
            ...common,
            handler: (message, { tx }) => insertCharge(tx, message),
          })
        : createConsumer<BenchMessage>({
            ...common,
            batch: { maxSize: ctx.batchSize },
            batchHandler: (items, { tx }) => {
              batches++;
              batchItems += items.length;
              return insertCharges(
                tx,
                items.map((item) => item.message),
              );
            },
          });
  consumer.on('processed', ({ durationMs }) => {
    txMs += durationMs;
    txCount++;
  });
  consumer.on('error', (error) => ctx.drain.fail(error));
  consumer.on('failed', ({ error }) => ctx.drain.fail(error));
  await consumer.start();
  try {
    await ctx.drain.wait(STALL_MS);
  } finally {
    await consumer.stop({ timeoutMs: 10_000 });
    ctx.notes['avgDeliverToSettledMs'] = settledMs / settled;
    ctx.notes['avgHandlerAndCommitMs'] = txMs / txCount;
    if (batches > 0) ctx.notes['avgBatchSize'] = batchItems / batches;
    if (ctx.pruning) notePrunes(ctx, prunes);
  }
}

/**
 * Rows the pruner deleted: in all (the consumer's start to its stop, so also while Kafka
 * joins its group) and during the drain (statements that returned between the clock's
 * start and the last message), with the rate during the drain.
 */
function notePrunes(ctx: RunContext, prunes: ReadonlyArray<{ at: number; rows: number }>): void {
  const { startedAt, finishedAt } = ctx.drain;
  const during = prunes.filter(
    (p) =>
      startedAt !== undefined &&
      finishedAt !== undefined &&
      p.at >= startedAt &&
      p.at <= finishedAt,
  );
  const duringRows = during.reduce((sum, p) => sum + p.rows, 0);
  ctx.notes['prunedRows'] = prunes.reduce((sum, p) => sum + p.rows, 0);
  ctx.notes['prunedDuringDrain'] = duringRows;
  if (startedAt !== undefined && finishedAt !== undefined)
    ctx.notes['prunedPerSecDuringDrain'] = (duringRows / (finishedAt - startedAt)) * 1000;
}
