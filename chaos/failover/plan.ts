import type { Rng } from '../rng.js';
import type { FailoverOptions, FailoverReport } from './cluster.js';

/**
 * Where a failover fires: right after a claim's COMMIT was `answered` by the primary
 * (its answer withheld: committed, the client does not know), right after one was
 * `sent` (the replication link stalled first, so it cannot be acknowledged), or at
 * an arbitrary moment (`none`). A run's failovers take them in this order.
 */
export type FailoverArm = 'answered' | 'sent' | 'none';
export const FAILOVER_ARMS: readonly FailoverArm[] = ['answered', 'sent', 'none'];

/** How long an armed failover waits for a COMMIT before it fires anyway. */
export const FAILOVER_ARM_WAIT_MS = 5000;

/** One failover's plan: its arm, a stalled standby (not before an answered COMMIT), a read-only window. */
export function failoverOptions(arm: FailoverArm, rng: Rng): FailoverOptions {
  return {
    how: 'kill',
    ...(arm === 'none' ? {} : { arm, armWaitMs: FAILOVER_ARM_WAIT_MS }),
    // Under synchronous replication no COMMIT is answered while the link stalls.
    ...(arm === 'answered' ? {} : { stallMs: rng.int(100, 800) }),
    // Workers reconnecting during the switch land on the standby, still read-only.
    readOnlyMs: rng.int(200, 1000),
  };
}

/** The nemesis's log line for one failover. */
export function describeFailover(r: FailoverReport): string {
  const c = r.caught;
  const caught =
    c === undefined
      ? ''
      : c.arm === 'answered'
        ? ` right after xid ${c.xid}'s COMMIT was answered (${c.tag ?? '?'}, withheld)`
        : ` right after xid ${c.xid}'s COMMIT was sent`;
  const statuses = new Map<string, number>();
  for (const u of r.unknown) statuses.set(u.status, (statuses.get(u.status) ?? 0) + 1);
  const unknown = [...statuses].map(([s, n]) => `${s} ${n}`).join(', ') || 'none';
  return `failover ${r.from} -> ${r.to}${caught}, down ${r.downMs} ms; COMMITs cut in flight: ${unknown}`;
}
