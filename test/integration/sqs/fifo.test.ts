import { describe, expect, it } from '@jest/globals';
import { waitFor } from '../../helpers/wait-for.js';
import { TIMEOUT, sqsIntegration } from './harness.js';

const it_ = sqsIntegration('fifo');

// What SQS guarantees for FIFO queues: messages of one group in send order, and none
// of a group while an earlier one of it is in flight. A failure mid-group is tested
// in fifo-retry.test.ts.

const GROUPS = 6;
const PER_GROUP = 12;

describe('SQS FIFO queues', () => {
  it(
    'keep per-group order under concurrency 10 while groups run in parallel; keys are MessageDeduplicationId',
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
      const keys: string[] = [];
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
              keys.push(ctx.key);
              await new Promise((r) => setTimeout(r, 2 + Math.random() * 10));
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
      expect(keys).toContain('dedup-g0-0');
    },
    TIMEOUT,
  );
});
