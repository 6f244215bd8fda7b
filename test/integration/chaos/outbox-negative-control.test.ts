/**
 * The outbox chaos checker is not vacuous: the same run with the pipeline broken on
 * purpose (`--control`) must fail.
 * - unordered: the outbox rows have no ordering key, so the relays publish an account's
 *   rows concurrently and to any partition: B applies them out of order;
 * - enqueue-order: A enqueues without the key lock, so its overlapping transactions of
 *   a hot account are published in enqueue order, not the commit order B is checked by;
 * - offset-key: B deduplicates by topic/partition/offset instead of the outbox id, so
 *   the batch the killed relay published before its mark is applied twice;
 * - no-dedup (HTTP): the receiver ignores Idempotency-Key, so a request re-sent after a
 *   503 or a dropped connection is applied twice.
 */
import { describe, expect, it } from '@jest/globals';
import { runOutboxChaos } from './outbox-run.js';
import { transcript } from './run-chaos.js';

describe('outbox chaos negative controls', () => {
  it.each([
    ['kafka', 'unordered', 'order_violations'],
    ['kafka', 'enqueue-order', 'order_violations'],
    ['kafka', 'offset-key', 'doubles'],
    ['http', 'no-dedup', 'doubles'],
  ])(
    '--publisher %s --control %s makes the run fail with %s > 0',
    async (publisher, control, field) => {
      const run = await runOutboxChaos(publisher, ['--control', control]);
      const context = `${run.line ?? '(no summary line)'}\n${transcript(run)}`;
      expect({ code: run.code, context }).toEqual({ code: 1, context });
      expect(Number(run.fields[field] ?? 'NaN')).toBeGreaterThan(0);
    },
    150_000,
  );
});
