/**
 * CI chaos smoke for Kafka: 2,000 logical messages (+25 % producer duplicates, 4 poison)
 * through 3 worker processes in one consumer group, 4 SIGKILLs (a random moment, after
 * COMMIT before the offset commit, inside the handler, during an offset commit), one
 * Postgres crash-restart and one broker SIGKILL + restart, against private Postgres and
 * Kafka instances (see run-chaos.ts). The full-size run is `npm run chaos`.
 */
import { describe, it } from '@jest/globals';
import { smoke } from './run-chaos.js';

// One file per broker so jest runs the two smokes in parallel workers.
describe('chaos smoke: Kafka', () => {
  it(
    'applies every key exactly once through kills, a Postgres restart and a broker restart, and dead-letters the poison',
    () => smoke('kafka', { broker_restarts: '1' }),
    180_000,
  );
});
