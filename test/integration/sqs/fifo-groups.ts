import { expect } from '@jest/globals';
import type { HandlerContext } from '../../../src/index.js';
import { waitFor } from '../../helpers/wait-for.js';
import type { Effect, Job, sqsIntegration } from './harness.js';

const GROUPS = 6;
const PER_GROUP = 12;

/** What a FIFO run saw beside the effects: overlap within a group, groups run at once. */
export interface FifoRun {
  effects: Effect[];
  overlapWithinGroup: boolean;
  maxGroupsAtOnce: number;
}

/**
 * Sends GROUPS × PER_GROUP messages interleaved across groups (so one receive mixes
 * them) to a fresh FIFO queue, runs a concurrency-10 consumer whose handler calls
 * `beforeEffect` and records the effect, and checks what SQS guarantees for FIFO:
 * every message applied once, each group in send order. The caller asserts the rest.
 */
export async function runInterleavedGroups(
  it_: ReturnType<typeof sqsIntegration>,
  beforeEffect: (job: Job, ctx: HandlerContext<Job>) => void = () => {},
): Promise<FifoRun> {
  const { url } = await it_.queues.create('orders', { fifo: true, visibilityTimeout: 10 });
  for (let seq = 0; seq < PER_GROUP; seq++) {
    for (let g = 0; g < GROUPS; g++) {
      await it_.queues.send(url, JSON.stringify({ id: `g${g}-${seq}`, group: `g${g}`, seq }), {
        MessageGroupId: `g${g}`,
        MessageDeduplicationId: `dedup-g${g}-${seq}`,
      });
    }
  }
  const active = new Map<string, number>();
  const run = { overlapWithinGroup: false, maxGroupsAtOnce: 0 };
  const consumer = await it_.worker(
    { queueUrl: url },
    {
      concurrency: 10,
      handler: async (job, ctx) => {
        const group = job.group!;
        if ((active.get(group) ?? 0) > 0) run.overlapWithinGroup = true;
        active.set(group, (active.get(group) ?? 0) + 1);
        run.maxGroupsAtOnce = Math.max(
          run.maxGroupsAtOnce,
          [...active.values()].filter((n) => n > 0).length,
        );
        try {
          await new Promise((r) => setTimeout(r, 2 + Math.random() * 10));
          beforeEffect(job, ctx);
          await ctx.tx.query('INSERT INTO effects (id, worker, attempt) VALUES ($1, $2, $3)', [
            job.id,
            group,
            ctx.attempt,
          ]);
        } finally {
          active.set(group, active.get(group)! - 1);
        }
      },
    },
  );
  await waitFor(() => consumer.stats().processed === GROUPS * PER_GROUP, {
    what: 'all processed',
    timeoutMs: 40_000,
  });
  await waitFor(async () => (await it_.queues.depth(url)).total === 0, { what: 'queue empty' });
  const effects = await it_.effects();
  expect(effects).toHaveLength(GROUPS * PER_GROUP);
  expect(new Set(effects.map((e) => e.id)).size).toBe(GROUPS * PER_GROUP);
  for (let g = 0; g < GROUPS; g++) {
    const order = effects.filter((e) => e.worker === `g${g}`).map((e) => e.id);
    expect(order).toEqual(Array.from({ length: PER_GROUP }, (_, seq) => `g${g}-${seq}`));
  }
  return { effects, ...run };
}
