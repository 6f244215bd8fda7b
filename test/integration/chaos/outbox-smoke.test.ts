/**
 * CI chaos smoke for the outbox (issues 13, 21), one run per publisher: 300 operations on
 * 10 accounts (+10 % producer duplicates) through service A's consumers, which enqueue
 * an outbox row and apply each in one transaction (overlapping on hot accounts); relays
 * of two destination sets publish the rows to Kafka, an SQS FIFO queue or an HTTP
 * receiver; service B applies them, deduplicated by the outbox id. One relay (between a
 * publish and its mark, so its batch is published twice), one A and one B process are
 * SIGKILLed, Postgres is crash-restarted, and two poison rows park and are requeued,
 * against private services (see run-chaos.ts). The full-size runs are
 * `npm run chaos -- --target outbox --publisher kafka|sqs|http` (chaos/RESULTS.md).
 */
import { describe, expect, it } from '@jest/globals';
import { runOutboxChaos } from './outbox-run.js';
import { transcript } from './run-chaos.js';

describe('chaos smoke: outbox', () => {
  it.each([
    ['kafka', 'kafka'],
    ['sqs', 'sqs'],
    ['http', 'sqs'],
  ])(
    '--publisher %s: every operation applied once in A and in B, in commit order per account, through kills, a Postgres restart and requeued poison rows',
    async (publisher, broker) => {
      const run = await runOutboxChaos(publisher);
      const context = `${run.line ?? '(no summary line)'}\n${transcript(run)}`;
      expect({ code: run.code, context }).toEqual({ code: 0, context });
      expect(run.fields).toMatchObject({
        target: 'outbox',
        publisher,
        broker,
        operations: '300',
        duplicates_sent: '30',
        kills: '3',
        relay_kills: '1',
        a_kills: '1',
        b_kills: '1',
        pg_restarts: '1',
        applied: '300',
        doubles: '0',
        lost: '0',
        order_violations: '0',
      });
      // Both poison rows parked and were put back (exit 0 also says the outbox drained).
      expect(Number(run.fields['parked'])).toBe(2);
      expect(Number(run.fields['requeued'])).toBeGreaterThanOrEqual(2);
    },
    150_000,
  );
});
