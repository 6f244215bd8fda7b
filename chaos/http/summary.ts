import type { Fault } from '../../kit/fault-proxy.js';
import { failoverFields, type FailoverResult } from '../failover/summary.js';
import type { HttpChaosArgs } from './args.js';
import type { HttpVerdict } from './checker.js';
import type { FaultVerdict } from './fault-checker.js';

export interface HttpRunResult {
  args: HttpChaosArgs;
  duplicatesSent: number;
  kills: number;
  pgRestarts: number;
  pgTerminations: number;
  /** Server processes that died on their own (not a planned SIGKILL) and were restarted. */
  serverCrashes: number;
  /** Exchanges (HTTP requests) through the proxies, by the fault each got. */
  proxy: Record<Fault, number>;
  /** The payments' verdict, and the fault operations' (planned: `handlerFaults`). */
  verdict: HttpVerdict;
  faults: FaultVerdict;
  handlerFaults: number;
  /** 2xx answers that reached a caller before their COMMIT (early.ts), the async window's excepted. */
  earlyAnswers: number;
  /** With `--failovers`: what they did (chaos/failover/accounting.ts). */
  failover?: FailoverResult;
  timedOut: boolean;
  shortfalls: string[];
  durationMs: number;
}

/** The one line a run prints on stdout, in the broker runs' format. */
export function httpSummaryLine(r: HttpRunResult): string {
  const requests = Object.values(r.proxy).reduce((a, b) => a + b, 0);
  const v = r.verdict;
  const f = r.faults;
  return [
    'chaos:',
    'target=http',
    `framework=${r.args.framework}`,
    // Named only when the handler writes through a data layer (pg's line is as before).
    ...(r.args.dataLayer === 'pg' ? [] : [`data_layer=${r.args.dataLayer}`]),
    `payments=${r.args.payments}`,
    `handler_faults=${r.handlerFaults}`,
    `duplicates_sent=${r.duplicatesSent}`,
    `kills=${r.kills}`,
    `pg_restarts=${r.pgRestarts}`,
    `pg_terminations=${r.pgTerminations}`,
    `server_crashes=${r.serverCrashes}`,
    `requests=${requests}`,
    `dropped=${r.proxy.drop}`,
    `reset=${r.proxy.reset}`,
    `delayed=${r.proxy.delay}`,
    `applied=${v.applied + f.applied}`,
    `doubles=${v.doubles + f.doubles}`,
    `lost=${v.lost + f.lost}`,
    `early_answers=${r.earlyAnswers}`,
    `cross_scope=${f.crossScope}`,
    `stray_effects=${f.strayEffects}`,
    `late_answers=${f.lateAnswers}`,
    `faults_fired=${f.faultsFired}`,
    `replays=${v.replays + f.replays}`,
    `replays_checked=${v.replaysChecked + f.replaysChecked}`,
    `mismatched=${v.mismatched + f.mismatched}`,
    `in_progress=${v.inProgress + f.inProgress}`,
    `gave_up=${v.gaveUp + f.gaveUp}`,
    ...(r.failover ? failoverFields(r.failover) : []),
    ...(r.timedOut ? [`unanswered=${v.unanswered + f.unanswered}`] : []),
  ].join(' ');
}

/**
 * As for the broker runs: 1 a double, a loss, an early or cross-scope answer, a
 * mismatch or another violation; 2 timeout; 3 planned faults missing.
 */
export function httpExitCode(r: HttpRunResult): number {
  const v = r.verdict;
  const f = r.faults;
  // An async failover's window (answered, then vanished with the old primary) is measured, not failed.
  if (v.doubles + f.doubles > 0 || v.lost - v.windowLost + f.lost > 0) return 1;
  if (r.earlyAnswers > 0 || f.crossScope > 0) return 1;
  if (r.timedOut) return 2;
  if (v.problems.length + f.problems.length > 0 || v.mismatched + f.mismatched > 0) return 1;
  if (r.shortfalls.length > 0) return 3;
  return 0;
}
