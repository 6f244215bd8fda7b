/**
 * CI chaos smoke for the outbox (issue 13): 300 operations on 10 accounts (+10 %
 * producer duplicates) through service A's consumers, which apply each and enqueue an
 * outbox row in the same transaction; two relays publish the rows to a second Kafka
 * topic; service B's consumers apply them, deduplicated by the outbox id. One relay
 * (between a publish and its mark, so its batch is published twice), one A and one B
 * worker are SIGKILLed and Postgres is crash-restarted, against private
 * Postgres and Kafka instances (see run-chaos.ts). The full-size run is
 * `npm run chaos -- --target outbox`.
 */
import { describe, expect, it } from '@jest/globals';
import { runChaos, transcript } from './run-chaos.js';

describe('chaos smoke: outbox (Kafka)', () => {
  it('applies every operation exactly once in A and in B, in per-account order, through relay, A and B kills and a Postgres restart', async () => {
    const run = await runChaos(
      [
        '--target',
        'outbox',
        '--broker',
        'kafka',
        '--operations',
        '300',
        '--accounts',
        '10',
        '--kills',
        '3',
        '--pg-restarts',
        '1',
        '--seed',
        '7',
        '--timeout',
        '100',
      ],
      120_000,
    );
    const context = `${run.line ?? '(no summary line)'}\n${transcript(run)}`;
    expect({ code: run.code, context }).toEqual({ code: 0, context });
    expect(run.fields).toMatchObject({
      target: 'outbox',
      broker: 'kafka',
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
  }, 150_000);
});
