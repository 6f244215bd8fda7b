/**
 * CI chaos smoke for SQS: 2,000 logical messages (+25 % producer duplicates, 4 poison)
 * through 3 worker processes, 4 SIGKILLs (a random moment, after COMMIT before the
 * delete, inside the handler, during a DeleteMessageBatch), one Postgres crash-restart
 * and 24 handler faults (swallowed SQL errors, deferred FK violations at COMMIT,
 * downstream ECONNREFUSED, killed backends, serialization contention), against private
 * Postgres and ElasticMQ instances (see run-chaos.ts). The full-size run is
 * `npm run chaos` (chaos/RESULTS.md).
 */
import { describe, it } from '@jest/globals';
import { smoke } from './run-chaos.js';

// One file per broker so jest runs the two smokes in parallel workers.
describe('chaos smoke: SQS', () => {
  it(
    'applies every key exactly once through kills, a Postgres restart and handler faults, and dead-letters the poison and the permanent faults',
    () => smoke('sqs'),
    180_000,
  );
});
