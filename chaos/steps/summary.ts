import type { Fault } from '../../kit/fault-proxy.js';
import type { StepsChaosArgs } from './args.js';
import type { StepsVerdict } from './checker.js';

export interface StepsRunResult {
  args: StepsChaosArgs;
  duplicatesSent: number;
  abandoned: number;
  kills: number;
  pgRestarts: number;
  serverCrashes: number;
  /** Client exchanges through the proxy in front of the server, by fault. */
  proxy: Record<Fault, number>;
  /** Requests the provider saw, and the planned faults that fired on them. */
  providerCalls: number;
  providerFaultsFired: number;
  /** Key rows unfinished when the callers were done, before the final completer pass. */
  unfinishedBeforeCompleter: number;
  /** Flows a completer drove to their answer: the servers' own, and the final pass. */
  completerFinished: number;
  verdict: StepsVerdict;
  timedOut: boolean;
  shortfalls: string[];
  durationMs: number;
}

/** The one line a run prints on stdout, in the other targets' format. */
export function stepsSummaryLine(r: StepsRunResult): string {
  const v = r.verdict;
  return [
    'chaos:',
    'target=steps',
    `framework=${r.args.framework}`,
    `operations=${r.args.operations}`,
    `abandoned=${r.abandoned}`,
    `declines=${r.args.declines}`,
    `duplicates_sent=${r.duplicatesSent}`,
    `kills=${r.kills}`,
    `pg_restarts=${r.pgRestarts}`,
    `server_crashes=${r.serverCrashes}`,
    `requests=${Object.values(r.proxy).reduce((a, b) => a + b, 0)}`,
    `dropped=${r.proxy.drop}`,
    `reset=${r.proxy.reset}`,
    `delayed=${r.proxy.delay}`,
    `provider_calls=${r.providerCalls}`,
    `provider_faults=${r.args.providerFaults}`,
    `provider_faults_fired=${r.providerFaultsFired}`,
    `completed=${v.completed}`,
    `declined=${v.declined}`,
    `never_arrived=${v.neverArrived}`,
    `completer_pending=${r.unfinishedBeforeCompleter}`,
    `completer_finished=${r.completerFinished}`,
    `doubles=${v.doubles}`,
    `lost=${v.lost}`,
    `unfinished=${v.unfinished}`,
    `mismatched=${v.mismatched}`,
    `replays=${v.replays}`,
    `replays_checked=${v.replaysChecked}`,
    `in_progress=${v.inProgress}`,
    `gave_up=${v.gaveUp}`,
    ...(r.timedOut ? [`unanswered=${v.unanswered}`] : []),
  ].join(' ');
}

/** 1 a double, a loss, an unfinished flow or a mismatch; 2 timeout; 3 planned faults missing. */
export function stepsExitCode(r: StepsRunResult): number {
  const v = r.verdict;
  if (v.doubles > 0 || v.lost > 0 || v.unfinished > 0) return 1;
  if (r.timedOut) return 2;
  if (v.problems.length > 0 || v.mismatched > 0) return 1;
  if (r.shortfalls.length > 0) return 3;
  return 0;
}
