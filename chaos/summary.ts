import type { ChaosArgs } from './args.js';
import type { Verdict } from './checker.js';
import type { NemesisReport } from './nemesis.js';

export interface RunResult {
  args: ChaosArgs;
  duplicatesSent: number;
  nemesis: NemesisReport;
  verdict: Verdict;
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
    `messages=${r.args.messages}`,
    `duplicates_sent=${r.duplicatesSent}`,
    `kills=${r.nemesis.kills}`,
    `pg_restarts=${r.nemesis.pgRestarts}`,
    `broker_restarts=${r.nemesis.brokerRestarts}`,
    `applied=${r.verdict.applied}`,
    `doubles=${r.verdict.doubles}`,
    `lost=${r.verdict.lost}`,
    `dead_lettered=${r.verdict.deadLettered}`,
  ].join(' ');
}

/**
 * 0 when nothing was doubled or lost, the poison all went to the dead-letter target and
 * nowhere else, and every planned fault happened; 1 on a double or a loss (or any
 * other violation of the checker); 2 on a timeout; 3 when faults did not happen.
 */
export function exitCode(r: RunResult): number {
  const v = r.verdict;
  if (v.doubles > 0 || v.lost > 0 || v.problems.length > 0) return 1;
  if (r.timedOut) return 2;
  if (r.shortfalls.length > 0) return 3;
  return 0;
}
