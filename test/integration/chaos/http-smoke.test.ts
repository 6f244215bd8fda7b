/**
 * CI chaos smoke for the HTTP side: 150 logical payments (10 % of them sent by two
 * callers at once) through the fault proxy (dropped responses, resets, responses held
 * past the client's timeout) to the payment server in a child process, which is
 * SIGKILLed 4 times (twice right after a COMMIT, before the response; twice at a
 * random moment) and restarted, with 2 terminations of its Postgres backends and one
 * Postgres crash-restart, against a private Postgres (see run-chaos.ts). The
 * full-size run is `npm run chaos -- --target http` (chaos/RESULTS.md).
 */
import { describe, expect, it } from '@jest/globals';
import { runChaos, transcript } from './run-chaos.js';

describe('chaos smoke: HTTP', () => {
  it('charges every payment exactly once through kills, terminations and a faulty network, and every answer is the stored one', async () => {
    const run = await runChaos(
      [
        '--target',
        'http',
        '--payments',
        '150',
        '--kills',
        '4',
        '--pg-terminations',
        '2',
        '--pg-restarts',
        '1',
        '--seed',
        '20240601',
        '--timeout',
        '100',
      ],
      110_000,
    );
    const context = `${run.line ?? '(no summary line)'}\n${transcript(run)}`;
    expect({ code: run.code, context }).toEqual({ code: 0, context });
    expect(run.fields).toMatchObject({
      target: 'http',
      payments: '150',
      kills: '4',
      pg_terminations: '2',
      pg_restarts: '1',
      applied: '150',
      doubles: '0',
      lost: '0',
      mismatched: '0',
      replays_checked: '150',
    });
    // The proxy did its part: responses lost after the server committed, and the
    // callers' retries of those were answered from the stored record.
    expect(Number(run.fields['dropped'])).toBeGreaterThan(0);
    expect(Number(run.fields['replays'])).toBeGreaterThan(0);
  }, 130_000);
});
