import type { ChaosArgs } from './args.js';
import type { Verdict } from './checker.js';
import { failoverFields, type FailoverResult } from '../failover/summary.js';
import type { NemesisReport } from './nemesis.js';

/** Handler faults of a run (see handler-faults.ts). */
export interface HandlerFaultReport {
  /** Faulty keys planned. */
  planned: number;
  /** Handler runs in which a planned fault fired (from the fault log). */
  fired: number;
  /** 40001 / 40P01 errors hot handlers saw inside their transactions. */
  serializationFailures: number;
}

export interface RunResult {
  args: ChaosArgs;
  duplicatesSent: number;
  nemesis: NemesisReport;
  verdict: Verdict;
  handlerFaults: HandlerFaultReport;
  /** With `--failovers`: what they did. */
  failover?: FailoverResult;
  /** Not quiescent before the deadline. */
  timedOut: boolean;
  /** Planned faults that could not happen (given endpoints) or did not happen. */
  shortfalls: string[];
  durationMs: number;
}

/** The one line a run prints on stdout. */
export function summaryLine(r: RunResult): string {
  return [
    'chaos:',
    `broker=${r.args.broker}`,
    // Named only when the handler writes through a data layer (pg's line is as before).
    ...(r.args.dataLayer === 'pg' ? [] : [`data_layer=${r.args.dataLayer}`]),
    ...(r.args.lambda ? ['function=lambda'] : []),
    `messages=${r.args.messages}`,
    `duplicates_sent=${r.duplicatesSent}`,
    `kills=${r.nemesis.kills}`,
    `pg_restarts=${r.nemesis.pgRestarts}`,
    `broker_restarts=${r.nemesis.brokerRestarts}`,
    `applied=${r.verdict.applied}`,
    `doubles=${r.verdict.doubles}`,
    `lost=${r.verdict.lost}`,
    // Checked only where order is promised per partition (Kafka, keyConcurrency 1).
    ...(r.verdict.orderViolations === undefined
      ? []
      : [`order_violations=${r.verdict.orderViolations}`]),
    `dead_lettered=${r.verdict.deadLettered}`,
    `handler_faults=${r.handlerFaults.planned}`,
    `faults_fired=${r.handlerFaults.fired}`,
    `serialization_failures=${r.handlerFaults.serializationFailures}`,
    ...(r.failover ? failoverFields(r.failover) : []),
    // Only a run that timed out has keys that may still be on their way.
    ...(r.timedOut ? [`unsettled=${r.verdict.unsettled}`] : []),
  ].join(' ');
}

/**
 * 0 when nothing was doubled or lost (an async failover's window excepted), every key that must be dead-lettered went to the
 * dead-letter target with an expected code and nothing else did, and every planned
 * fault happened; 1 on a double or a loss (or any other violation of the checker); 2
 * on a timeout (whose other problems may be keys still on their way); 3 when faults
 * did not happen.
 */
export function exitCode(r: RunResult): number {
  const v = r.verdict;
  // An async failover's window (acked, then vanished with the old primary) is measured, not failed.
  if (v.doubles > 0 || v.lost > (r.failover?.windowLost ?? 0)) return 1;
  if (r.timedOut) return 2;
  if (v.problems.length > 0) return 1;
  if (r.shortfalls.length > 0) return 3;
  return 0;
}
