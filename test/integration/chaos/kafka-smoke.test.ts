/**
 * CI chaos smoke for Kafka: 2,000 logical messages (+25 % producer duplicates, 4 poison)
 * through 3 worker processes in one consumer group, 4 SIGKILLs (a random moment, after
 * COMMIT before the offset commit, inside the handler, during an offset commit), one
 * Postgres crash-restart, one broker SIGKILL + restart and 24 handler faults (swallowed
 * SQL errors, deferred FK violations at COMMIT, downstream ECONNREFUSED, killed
 * backends, serialization contention), against private Postgres and Kafka instances
 * (see run-chaos.ts). The full-size run is `npm run chaos`.
 */
import { describe, it } from '@jest/globals';
import { smoke } from './run-chaos.js';

// One file per broker so jest runs the two smokes in parallel workers.
describe('chaos smoke: Kafka', () => {
  it(
    'applies every key exactly once through kills, Postgres and broker restarts and handler faults, and dead-letters the poison and the permanent faults',
    () => smoke('kafka', { broker_restarts: '1' }),
    180_000,
  );
});
