/**
 * CI chaos smoke for steps, on Express: 120 operations of the three-step flow (DB step 'order',
 * provider call 'charge', DB step 'record') through the fault proxy, the server SIGKILLed
 * 4 times (twice at a flow boundary: inside a step before its COMMIT, a step
 * committed, a provider answer not yet recorded; twice at a random moment) and restarted, one Postgres crash-restart, the
 * test provider failing some operations' first calls (timeouts, 5xx before and after
 * applying, dropped answers) and declining some cards, a share of clients that send once
 * and walk away (some of them meeting a provider fault: their flow stops at a recovery
 * point nobody retries); the completer finishes what is left. Against a private Postgres (see
 * run-chaos.ts). The full-size run is `npm run chaos -- --target steps --operations 3000
 * --kills 6 --pg-restarts 1 --provider-faults 30`.
 */
import { describe, expect, it } from '@jest/globals';
import { runChaos, transcript } from './run-chaos.js';

describe('chaos smoke: steps', () => {
  it('charges every operation once at the provider, applies each step once, and ends every flow with the answer the provider agrees with', async () => {
    const run = await runChaos(
      [
        '--target',
        'steps',
        // Express here; the full-size run's default is Fastify.
        '--framework',
        'express',
        '--operations',
        '120',
        '--kills',
        '4',
        '--pg-restarts',
        '1',
        '--provider-faults',
        '12',
        '--declines',
        '6',
        '--seed',
        '20261207',
        '--timeout',
        '120',
      ],
      150_000,
    );
    const context = `${run.line ?? '(no summary line)'}\n${transcript(run)}`;
    expect({ code: run.code, context }).toEqual({ code: 0, context });
    expect(run.fields).toMatchObject({
      target: 'steps',
      framework: 'express',
      operations: '120',
      kills: '4',
      pg_restarts: '1',
      doubles: '0',
      lost: '0',
      unfinished: '0',
      mismatched: '0',
    });
    // Declined cards end with their stored 402 (unless their one abandoned attempt never arrived).
    expect(Number(run.fields['declined'])).toBeGreaterThan(0);
    const ended =
      Number(run.fields['completed']) +
      Number(run.fields['declined']) +
      Number(run.fields['never_arrived']);
    expect(ended).toBe(120);
    expect(Number(run.fields['provider_faults_fired'])).toBeGreaterThan(0);
    // Abandoned operations stopped at a recovery point (a provider fault, a kill of their
    // owner) that nobody retried: only a completer finished them.
    expect(Number(run.fields['completer_finished'])).toBeGreaterThan(0);
    expect(Number(run.fields['replays_checked'])).toBe(120 - Number(run.fields['never_arrived']));
  }, 180_000);
});
