import type { ConsumerStats } from '../types.js';

/** Fresh zeroed counters. */
export function emptyStats(): ConsumerStats {
  return {
    received: 0,
    processed: 0,
    duplicates: 0,
    failed: 0,
    retried: 0,
    deadLettered: 0,
    mismatches: 0,
    expired: 0,
    busy: 0,
    released: 0,
    ackFailures: 0,
    serializationRetries: 0,
    pruned: 0,
    inFlight: 0,
  };
}
