import type { Rng } from '../../kit/rng.js';
import type { FailoverOptions, FailoverReport } from '../../kit/services/cluster/cluster.js';

/**
 * Where a failover fires: right after a claim's COMMIT was `answered` by the primary
 * (its answer withheld: committed, the client does not know), right after one was
 * `sent` (the replication link stalled first, so it cannot be acknowledged), or at
 * an arbitrary moment (`none`). A run's failovers take them in this order.
 */
export type FailoverArm = 'answered' | 'sent' | 'none';
export const FAILOVER_ARMS: readonly FailoverArm[] = ['answered', 'sent', 'none'];

/** The arm of a run's `index`-th failover (from 0): the first right after an answered COMMIT. */
export function failoverArm(index: number): FailoverArm {
  return FAILOVER_ARMS[index % FAILOVER_ARMS.length] as FailoverArm;
}

/**
 * Fires a run's `index`-th failover on `services` (its arm, stall and read-only window
 * drawn from `rng`); resolves with its report and the nemesis's line for it.
 */
export async function fireFailover(
  services: { failover(options: FailoverOptions): Promise<FailoverReport> },
  index: number,
  rng: Rng,
): Promise<{ report: FailoverReport; line: string }> {
  const report = await services.failover(failoverOptions(failoverArm(index), rng));
  return { report, line: describeFailover(report) };
}

/**
 * Where in a run (0..1 of its progress) its `n` failovers fire: stratified over
 * 10..80 %, one somewhere in each n-th of it, in order.
 */
export function failoverPoints(rng: Rng, n: number): number[] {
  const slice = 0.7 / Math.max(1, n);
  return Array.from({ length: n }, (_, i) => 0.1 + slice * (i + rng.next()));
}

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
