import { describe, expect, it } from '@jest/globals';
import { runInterleavedGroups } from './fifo-groups.js';
import { TIMEOUT, sqsIntegration } from './harness.js';

const it_ = sqsIntegration('fifo_retry');

// A message that fails mid-group is retried before the rest of its group: the consumer
// releases the rest it received with it, and SQS keeps the group blocked while the
// failed message is in flight (its retry delay), so the group resumes in order.
// LocalStack 3.8 unblocks a FIFO group as soon as any re-received message of it is
// visible again, even while an earlier one is in flight (AWS: in-flight messages block
// their group), so this file runs against AWS-faithful emulators only: see
// docs/compatibility.md and .ci/run.

describe('SQS FIFO queues with a failure mid-group', () => {
  it(
    'hold the rest of the group back until the failed message is retried, keeping per-group order',
    async () => {
      let failedOnce = false;
      const run = await runInterleavedGroups(it_, (job) => {
        // One failure mid-group: the rest of that group must wait for its retry.
        if (job.id === 'g2-3' && !failedOnce) {
          failedOnce = true;
          throw new Error('transient');
        }
      });
      expect(run.overlapWithinGroup).toBe(false);
      expect(run.maxGroupsAtOnce).toBeGreaterThan(1);
      expect(failedOnce).toBe(true);
      expect(run.effects.find((e) => e.id === 'g2-3')?.attempt).toBeGreaterThanOrEqual(2);
    },
    TIMEOUT,
  );
});
