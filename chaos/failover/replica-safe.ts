import type { ReplicaSafeOptions } from 'effectively-once';

/**
 * `--replica-safe` (every target): set by chaos/main.ts for the run and inherited by
 * every process it forks, so each door (the workers' consumers, the HTTP servers, the
 * outbox's consumers and relays) turns `replicaSafe` on.
 */
export const REPLICA_SAFE_ENV = 'EO_CHAOS_REPLICA_SAFE';

/**
 * The doors' option under `--replica-safe`, else off. Any standby counts (the harness
 * names each new one afresh); `hold`, with room for a re-seeded standby to catch up
 * after a failover before a held ack is given up on (and retried).
 */
export function chaosReplicaSafe(): ReplicaSafeOptions | false {
  return process.env[REPLICA_SAFE_ENV] === '1' ? { maxWaitMs: 10_000, onLag: 'hold' } : false;
}

/** Takes `--replica-safe` out of `argv` (no target's parser knows it) and says whether it was there. */
export function takeReplicaSafe(argv: string[]): { on: boolean; argv: string[] } {
  const rest = argv.filter((a) => a !== '--replica-safe');
  return { on: rest.length !== argv.length, argv: rest };
}
