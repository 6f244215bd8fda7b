import { retryDelay } from '../backoff.js';
import { EffectivelyOnceError, describe } from '../errors.js';
import type { RelayEventHub } from './events.js';
import type { PublishStep } from './publish.js';
import type { OutboxRecord } from './record.js';
import type { RelayStats } from './relay-types.js';
import type { ClaimedBatch, Failure, RelayStatements } from './statements.js';

/** What {@link settleBatch} needs from the relay. */
export interface SettleContext {
  publish: PublishStep;
  statements: RelayStatements;
  hub: RelayEventHub;
  /** The relay's counters, added to. */
  counters: RelayStats;
  maxAttempts: number;
  backoff: { initialMs: number; maxMs: number };
}

/**
 * Publishes a claimed batch (each destination's rows in one publisher call, the
 * destinations at once), marks every row published or failed under the batch's
 * fencing token, and reports each row's fate as events and counters.
 */
export async function settleBatch(batch: ClaimedBatch, ctx: SettleContext): Promise<void> {
  const { hub, counters } = ctx;
  const started = performance.now();
  const groups = new Map<string, OutboxRecord[]>();
  for (const record of batch.records) {
    const group = groups.get(record.destination) ?? [];
    group.push(record);
    groups.set(record.destination, group);
  }
  const errors = new Map<string, unknown>();
  await Promise.all(
    [...groups].map(async ([destination, records]) => {
      for (const [id, error] of await ctx.publish(destination, records)) errors.set(id, error);
    }),
  );
  const byId = new Map(batch.records.map((r) => [r.id, r]));
  const okIds = batch.records.filter((r) => !errors.has(r.id)).map((r) => r.id);
  const failures: Failure[] = [...errors].map(([id, error]) => ({
    id,
    error: describe(error).slice(0, 4000),
    delayMs: retryDelay(byId.get(id)?.attempts ?? 1, ctx.backoff),
    park: error instanceof EffectivelyOnceError && !error.retryable,
  }));
  const [marked, failed] = await Promise.all([
    ctx.statements.markPublished(okIds, batch.token),
    ctx.statements.markFailed(failures, batch.token, ctx.maxAttempts),
  ]);
  const summary = {
    claimed: batch.records.length,
    published: 0,
    failed: 0,
    parked: 0,
    fenced: 0,
  };
  for (const id of okIds) {
    const record = byId.get(id)!;
    const ageMs = marked.get(id);
    if (ageMs === undefined) {
      summary.fenced++;
      hub.emit('fenced', { id, destination: record.destination });
      continue;
    }
    summary.published++;
    hub.emit('published', {
      id,
      destination: record.destination,
      orderingKey: record.orderingKey,
      attempts: record.attempts,
      ageMs,
    });
  }
  const outcome = new Map(failed.map((f) => [f.id, f.state]));
  for (const failure of failures) {
    const record = byId.get(failure.id)!;
    const error = errors.get(failure.id);
    const state = outcome.get(failure.id);
    summary.failed++;
    if (state === undefined) {
      summary.fenced++;
      hub.emit('fenced', { id: failure.id, destination: record.destination });
    } else if (state === 'parked') {
      summary.parked++;
      hub.emit('parked', {
        id: failure.id,
        destination: record.destination,
        attempts: record.attempts,
        error,
      });
    } else {
      hub.emit('failed', {
        id: failure.id,
        destination: record.destination,
        attempts: record.attempts,
        error,
        retryInMs: failure.delayMs,
      });
    }
  }
  counters.batches++;
  counters.published += summary.published;
  counters.failed += summary.failed;
  counters.parked += summary.parked;
  counters.fenced += summary.fenced;
  hub.emit('batch', { ...summary, latencyMs: performance.now() - started });
}
