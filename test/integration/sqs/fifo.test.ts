import { describe, expect, it } from '@jest/globals';
import { runInterleavedGroups } from './fifo-groups.js';
import { TIMEOUT, sqsIntegration } from './harness.js';

const it_ = sqsIntegration('fifo');

// What SQS guarantees for FIFO queues: messages of one group in send order, and none
// of a group while an earlier one of it is in flight. A failure mid-group is tested
// in fifo-retry.test.ts.

describe('SQS FIFO queues', () => {
  it(
    'keep per-group order under concurrency 10 while groups run in parallel; keys are MessageDeduplicationId',
    async () => {
      const keys: string[] = [];
      const run = await runInterleavedGroups(it_, (_job, ctx) => keys.push(ctx.key));
      expect(run.overlapWithinGroup).toBe(false);
      expect(run.maxGroupsAtOnce).toBeGreaterThan(1);
      expect(keys).toContain('dedup-g0-0');
    },
    TIMEOUT,
  );
});
