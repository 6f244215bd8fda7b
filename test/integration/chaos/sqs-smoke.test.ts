/**
 * CI chaos smoke for SQS: 2,000 logical messages (+25 % producer duplicates, 4 poison)
 * through 3 worker processes, 4 SIGKILLs (a random moment, after COMMIT before the
 * delete, inside the handler, during a DeleteMessageBatch) and one Postgres crash-restart,
 * against private Postgres and ElasticMQ instances (see run-chaos.ts). The full-size
 * run is `npm run chaos` (chaos/RESULTS.md).
 */
import { describe, it } from '@jest/globals';
import { smoke } from './run-chaos.js';

// One file per broker so jest runs the two smokes in parallel workers.
describe('chaos smoke: SQS', () => {
  it(
    'applies every key exactly once through kills and a Postgres restart, and dead-letters the poison',
    () => smoke('sqs'),
    180_000,
  );
});
