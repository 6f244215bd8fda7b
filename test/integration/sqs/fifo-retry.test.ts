import { describe, expect, it } from '@jest/globals';
import { waitFor } from '../../helpers/wait-for.js';
import { TIMEOUT, sqsIntegration } from './harness.js';

const it_ = sqsIntegration('fifo_retry');

// A message that fails mid-group is retried before the rest of its group: the consumer
// releases the rest it received with it, and SQS keeps the group blocked while the
// failed message is in flight (its retry delay), so the group resumes in order.
// LocalStack 3.8 unblocks a FIFO group as soon as any re-received message of it is
// visible again, even while an earlier one is in flight (AWS: in-flight messages block
// their group), so this file runs against AWS-faithful emulators only: see
// docs/compatibility.md and .ci/run.

const GROUPS = 6;
const PER_GROUP = 12;

describe('SQS FIFO queues with a failure mid-group', () => {
  it(
    'hold the rest of the group back until the failed message is retried, keeping per-group order',
    async () => {
      const { url } = await it_.queues.create('orders', { fifo: true, visibilityTimeout: 10 });
      // Interleave the groups so one receive mixes them.
      for (let seq = 0; seq < PER_GROUP; seq++) {
        for (let g = 0; g < GROUPS; g++) {
          await it_.queues.send(url, JSON.stringify({ id: `g${g}-${seq}`, group: `g${g}`, seq }), {
            MessageGroupId: `g${g}`,
            MessageDeduplicationId: `dedup-g${g}-${seq}`,
          });
        }
      }
      const active = new Map<string, number>();
      let overlapWithinGroup = false;
      let maxGroupsAtOnce = 0;
      let failedOnce = false;
      const consumer = await it_.worker(
        { queueUrl: url },
        {
          concurrency: 10,
          handler: async (job, ctx) => {
            const group = job.group!;
            if ((active.get(group) ?? 0) > 0) overlapWithinGroup = true;
            active.set(group, (active.get(group) ?? 0) + 1);
            maxGroupsAtOnce = Math.max(
              maxGroupsAtOnce,
              [...active.values()].filter((n) => n > 0).length,
            );
            try {
              await new Promise((r) => setTimeout(r, 2 + Math.random() * 10));
              // One failure mid-group: the rest of that group must wait for its retry.
              if (job.id === 'g2-3' && !failedOnce) {
                failedOnce = true;
                throw new Error('transient');
              }
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
      expect(overlapWithinGroup).toBe(false);
      expect(maxGroupsAtOnce).toBeGreaterThan(1);
      expect(failedOnce).toBe(true);
      expect(effects.find((e) => e.id === 'g2-3')?.attempt).toBeGreaterThanOrEqual(2);
    },
    TIMEOUT,
  );
});
