import { failoverFields } from '../failover/summary.js';
import type { OutboxRunResult } from './run.js';

/** The one line a run prints on stdout, in the broker runs' format. */
export function outboxSummaryLine(r: OutboxRunResult): string {
  const v = r.verdict;
  return [
    'chaos:',
    'target=outbox',
    `publisher=${r.args.publisher}`,
    `broker=${r.args.broker}`,
    `operations=${r.args.operations}`,
    `accounts=${r.args.accounts}`,
    `duplicates_sent=${r.duplicatesSent}`,
    `kills=${r.kills.relay + r.kills.a + r.kills.b}`,
    `relay_kills=${r.kills.relay}`,
    `relay_after_publish=${r.relayAfterPublish}`,
    `a_kills=${r.kills.a}`,
    `b_kills=${r.kills.b}`,
    `pg_restarts=${r.pgRestarts}`,
    `broker_restarts=${r.brokerRestarts}`,
    `parked=${r.parked}`,
    `requeued=${r.requeued}`,
    `applied=${v.applied}`,
    `doubles=${v.doubles}`,
    `lost=${v.lost}`,
    `order_violations=${v.orderViolations}`,
    ...(r.republished === undefined ? [] : [`republished=${r.republished}`]),
    ...(r.failover ? failoverFields(r.failover) : []),
    ...(r.args.control === undefined ? [] : [`control=${r.args.control}`]),
    ...(r.timedOut ? [`unsettled=${r.unsettled}`] : []),
  ].join(' ');
}

/** As for the broker runs: 1 a double, loss or order violation; 2 timeout; 3 planned faults missing. */
export function outboxExitCode(r: OutboxRunResult): number {
  const v = r.verdict;
  // An async failover's window (acked, then vanished with the old primary) is measured, not failed.
  if (v.doubles > 0 || v.lost > v.windowLost || v.orderViolations > 0) {
    // A timed-out run's missing operations may still be on their way.
    if (r.timedOut && v.doubles === 0 && v.orderViolations === 0) return 2;
    return 1;
  }
  if (r.timedOut) return 2;
  if (v.problems.length > 0) return 1;
  if (r.shortfalls.length > 0) return 3;
  return 0;
}
