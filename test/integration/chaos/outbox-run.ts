import { runChaos, type ChaosRun } from './run-chaos.js';

/**
 * An outbox chaos run of the CI's size (300 operations on 10 accounts, 3 kills, one
 * Postgres restart, 2 poison rows, seed 7) through `publisher`, plus `extra` arguments.
 */
export function runOutboxChaos(publisher: string, extra: string[] = []): Promise<ChaosRun> {
  return runChaos(
    [
      '--target',
      'outbox',
      '--publisher',
      publisher,
      '--operations',
      '300',
      '--accounts',
      '10',
      '--kills',
      '3',
      '--seed',
      '7',
      '--timeout',
      '100',
      ...extra,
    ],
    120_000,
  );
}
