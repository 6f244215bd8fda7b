import type { Fault } from '../../test/helpers/fault-proxy.js';
import type { HttpChaosArgs } from './args.js';
import type { HttpVerdict } from './checker.js';

export interface HttpRunResult {
  args: HttpChaosArgs;
  duplicatesSent: number;
  kills: number;
  pgRestarts: number;
  pgTerminations: number;
  /** Server processes that died on their own (not a planned SIGKILL) and were restarted. */
  serverCrashes: number;
  /** Exchanges (HTTP requests) through the proxy, by the fault each got. */
  proxy: Record<Fault, number>;
  verdict: HttpVerdict;
  timedOut: boolean;
  shortfalls: string[];
  durationMs: number;
}

/** The one line a run prints on stdout, in the broker runs' format. */
export function httpSummaryLine(r: HttpRunResult): string {
  const requests = Object.values(r.proxy).reduce((a, b) => a + b, 0);
  return [
    'chaos:',
    'target=http',
    `framework=${r.args.framework}`,
    `payments=${r.args.payments}`,
    `duplicates_sent=${r.duplicatesSent}`,
    `kills=${r.kills}`,
    `pg_restarts=${r.pgRestarts}`,
    `pg_terminations=${r.pgTerminations}`,
    `server_crashes=${r.serverCrashes}`,
    `requests=${requests}`,
    `dropped=${r.proxy.drop}`,
    `reset=${r.proxy.reset}`,
    `delayed=${r.proxy.delay}`,
    `applied=${r.verdict.applied}`,
    `doubles=${r.verdict.doubles}`,
    `lost=${r.verdict.lost}`,
    `replays=${r.verdict.replays}`,
    `replays_checked=${r.verdict.replaysChecked}`,
    `mismatched=${r.verdict.mismatched}`,
    `in_progress=${r.verdict.inProgress}`,
    `gave_up=${r.verdict.gaveUp}`,
    ...(r.timedOut ? [`unanswered=${r.verdict.unanswered}`] : []),
  ].join(' ');
}

/** As for the broker runs: 1 double, loss or mismatch; 2 timeout; 3 planned faults missing. */
export function httpExitCode(r: HttpRunResult): number {
  const v = r.verdict;
  if (v.doubles > 0 || v.lost > 0) return 1;
  if (r.timedOut) return 2;
  if (v.problems.length > 0 || v.mismatched > 0) return 1;
  if (r.shortfalls.length > 0) return 3;
  return 0;
}
