/**
 * The chaos checker is not vacuous: the same harness, with the handler broken on
 * purpose (`--control`), must report the doubles or the losses and exit 1.
 * - doubles: the effect is written with autocommit, outside `ctx.tx`, so the worker
 *   killed inside its handler leaves effects whose claims rolled back;
 * - losses: the handler acks (deletes) its message before writing, so the same kill
 *   loses the messages that worker had in flight.
 */
import { describe, expect, it } from '@jest/globals';
import { runChaos, transcript } from './run-chaos.js';

describe('chaos negative controls (SQS)', () => {
  it.each([
    ['doubles', 'doubles'],
    ['losses', 'lost'],
  ])(
    '--control %s makes the run fail with %s > 0',
    async (control, field) => {
      const run = await runChaos(
        [
          '--broker',
          'sqs',
          '--messages',
          '200',
          '--workers',
          '2',
          '--kills',
          '4',
          '--pg-restarts',
          '0',
          '--seed',
          '7',
          '--timeout',
          '60',
          '--control',
          control,
          // The controls test the checker against kills alone.
          '--handler-faults',
          '0',
        ],
        75_000,
      );
      const context = `${run.line ?? '(no summary line)'}\n${transcript(run)}`;
      expect({ code: run.code, context }).toEqual({ code: 1, context });
      expect(Number(run.fields[field] ?? 'NaN')).toBeGreaterThan(0);
    },
    90_000,
  );
});
