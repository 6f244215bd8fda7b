/**
 * CI chaos smoke for Kafka: 2,000 logical messages (+25 % producer duplicates, 4 poison)
 * through 3 worker processes in one consumer group, 4 SIGKILLs (a random moment, after
 * COMMIT before the offset commit, inside the handler, during an offset commit), one
 * Postgres crash-restart and one broker SIGKILL + restart, against private Postgres and
 * Kafka instances (see run-chaos.ts). The full-size run is `npm run chaos`.
 */
import { describe, expect, it } from '@jest/globals';
import { runChaos, transcript } from './run-chaos.js';

describe('chaos smoke: Kafka', () => {
  it('applies every key exactly once through kills, a Postgres restart and a broker restart, and dead-letters the poison', async () => {
    const run = await runChaos(
      [
        '--broker',
        'kafka',
        '--messages',
        '2000',
        '--workers',
        '3',
        '--kills',
        '4',
        '--poison',
        '4',
        '--seed',
        '20240601',
        '--timeout',
        '140',
      ],
      150_000,
    );
    const context = `${run.line ?? '(no summary line)'}\n${transcript(run)}`;
    expect({ code: run.code, context }).toEqual({ code: 0, context });
    expect(run.fields).toMatchObject({
      broker: 'kafka',
      messages: '2000',
      kills: '4',
      pg_restarts: '1',
      broker_restarts: '1',
      applied: '2000',
      doubles: '0',
      lost: '0',
      dead_lettered: '4',
    });
    expect(Number(run.fields['duplicates_sent'])).toBeGreaterThanOrEqual(400);
  }, 180_000);
});
