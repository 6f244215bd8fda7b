import type { Answer, PaymentLog } from './clients.js';
import type { EffectRow, TimingRow } from './fault-db.js';
import { FAULT_TIMEOUT_MS, streamBody, type FaultOp, type HttpFaultKind } from './fault-plan.js';

/** How long after `timeoutMs` a timed-out run's answer may still go out. */
export const LATE_GRACE_MS = 2000;

export interface FaultVerdict {
  /** Operations whose effect committed exactly once, from one run. */
  applied: number;
  /** Operations with an effect row more than once, or rows of more than one run. */
  doubles: number;
  /** Operations with no `main` row, or missing a part the committed run must have written. */
  lost: number;
  /** Operations whose caller got an answer another operation's run made (another tenant's, another table's). */
  crossScope: number;
  /**
   * Operations with an effect row committed by a run in which a fault fired (it must
   * have rolled back), or outside the transaction of its run's other rows (autocommit).
   */
  strayEffects: number;
  /** Runs past `timeoutMs` on purpose whose answer came more than LATE_GRACE_MS after it. */
  lateAnswers: number;
  /** Operations whose answers differ (between callers, from the run that committed, from the replay). */
  mismatched: number;
  replays: number;
  replaysChecked: number;
  inProgress: number;
  gaveUp: number;
  unanswered: number;
  /** Handler runs in which a planned fault fired, and per kind. */
  faultsFired: number;
  firedByKind: Map<HttpFaultKind, number>;
  problems: string[];
}

/** Everything the checker reads for the fault operations. */
export interface FaultState {
  ops: FaultOp[];
  logs: Map<string, PaymentLog>;
  /** Effect rows before the direct replay, and after it (it must change nothing). */
  effects: EffectRow[];
  effectsAfter: EffectRow[];
  /** Runs in which a fault fired, per operation. */
  fired: Map<string, Set<number>>;
  replayed: Map<string, Answer>;
  timings: TimingRow[];
}

/**
 * Each fault operation's effect, answers and timing: its committed rows are one run's,
 * each part once, of a run in which no fault fired; every answer its callers got (and the
 * direct replay after the run) names that run, with the planned status and bytes (a
 * stream: its whole body, or as a replay the stored nothing); no answer made for another
 * operation; every run that timed out on purpose answered within LATE_GRACE_MS of
 * `timeoutMs`.
 */
export function checkFaultOps(state: FaultState): FaultVerdict {
  const v: FaultVerdict = {
    applied: 0,
    doubles: 0,
    lost: 0,
    crossScope: 0,
    strayEffects: 0,
    lateAnswers: 0,
    mismatched: 0,
    replays: 0,
    replaysChecked: 0,
    inProgress: 0,
    gaveUp: 0,
    unanswered: 0,
    faultsFired: 0,
    firedByKind: new Map(),
    problems: [],
  };
  const examples = new Map<string, string[]>();
  const flag = (what: string, op: string): void => {
    examples.set(what, [...(examples.get(what) ?? []), op]);
  };
  const rowsOf = group(state.effects);
  const after = group(state.effectsAfter);
  for (const op of state.ops) {
    const log = state.logs.get(op.id);
    const fired = state.fired.get(op.id) ?? new Set<number>();
    v.faultsFired += fired.size;
    v.firedByKind.set(op.kind, (v.firedByKind.get(op.kind) ?? 0) + fired.size);
    v.inProgress += log?.inProgress ?? 0;
    v.gaveUp += log?.gaveUp ?? 0;
    v.unanswered += log?.unanswered ?? 0;
    v.replays += log?.answers.filter((a) => a.replayed).length ?? 0;
    const answers = log?.answers ?? [];
    const direct = state.replayed.get(op.id);
    const all = direct === undefined ? answers : [...answers, direct];
    const foreign = all
      .map((a) => a.chaos?.split(' ')[0])
      .find((o) => o !== undefined && o !== op.id);
    if (foreign !== undefined) {
      v.crossScope++;
      flag('an answer made for another operation', `${op.id} got ${foreign}'s`);
    }
    const rows = rowsOf.get(op.id) ?? [];
    if (signature(rows) !== signature(after.get(op.id) ?? []))
      flag('the direct replay changed its effect', op.id);
    const own = (r: EffectRow): boolean => r.tx === rows.find((m) => m.run === r.run)?.tx;
    if (rows.some((r) => fired.has(r.run) || !own(r))) {
      v.strayEffects++;
      flag(
        'an effect committed by a run whose fault fired (threw, timed out, lost its backend, failed COMMIT), or outside its transaction',
        op.id,
      );
    }
    const main = rows.filter((r) => r.part === 'main');
    const runs = new Set(rows.map((r) => r.run));
    const parts = new Map<string, number>();
    for (const r of rows) parts.set(r.part, (parts.get(r.part) ?? 0) + 1);
    if (main.length === 0) {
      v.lost++;
      flag('no effect (lost)', op.id);
      continue;
    }
    if (runs.size > 1 || [...parts.values()].some((n) => n > 1)) {
      v.doubles++;
      flag('effect rows of more than one run, or a part twice', op.id);
      continue;
    }
    const run = main[0]!.run;
    if (op.parts.some((p) => !parts.has(p))) {
      v.lost++;
      flag('a part of its effect missing (a write through ctx.tx that did not commit)', op.id);
      continue;
    }
    v.applied++;
    let consistent = foreign === undefined;
    // Answers made for another operation are counted above, once.
    for (const answer of all.filter((a) => (a.chaos?.split(' ')[0] ?? op.id) === op.id)) {
      const problem = answerProblem(op, run, answer);
      if (problem !== undefined) {
        flag(problem, op.id);
        consistent = false;
      }
    }
    if (direct === undefined || !direct.replayed) {
      flag('the direct replay after the run was not a replay', op.id);
      consistent = false;
    } else if (consistent) v.replaysChecked++;
    if (!consistent) v.mismatched++;
  }
  for (const t of state.timings) {
    if (t.ms <= FAULT_TIMEOUT_MS + LATE_GRACE_MS) continue;
    v.lateAnswers++;
    flag(
      `a run past timeoutMs on purpose answered more than ${LATE_GRACE_MS} ms after it`,
      `${t.op} (${t.answered ? String(t.status) : 'nothing'} at ${t.ms} ms)`,
    );
  }
  for (const [what, ops] of examples)
    v.problems.push(`${what}: ${ops.length} (e.g. ${ops.slice(0, 5).join(', ')})`);
  return v;
}

/** What is wrong with one answer of `op`, whose run `run` committed; undefined if nothing. */
export function answerProblem(op: FaultOp, run: number, answer: Answer): string | undefined {
  if (answer.status !== op.status) return `a final answer ${answer.status}, not ${op.status}`;
  if (answer.chaos !== `${op.id} ${run}`)
    return answer.chaos === null
      ? 'a final answer that names no run'
      : 'a final answer from a run that did not commit';
  if (op.kind === 'stream') {
    const whole = streamBody(op.id, run);
    const storedNothing = answer.replayed && answer.body === '' && answer.omitted === 'stream';
    return answer.body === whole || storedNothing
      ? undefined
      : 'a streamed body cut short or altered';
  }
  const body = parse(answer.body);
  return body?.op === op.id && body.run === run ? undefined : 'a body that does not name its run';
}

function group(rows: EffectRow[]): Map<string, EffectRow[]> {
  const by = new Map<string, EffectRow[]>();
  for (const r of rows) by.set(r.op, [...(by.get(r.op) ?? []), r]);
  return by;
}

function signature(rows: EffectRow[]): string {
  return rows
    .map((r) => `${r.run}/${r.part}`)
    .sort()
    .join(',');
}

function parse(text: string): { op?: string; run?: number } | undefined {
  try {
    return JSON.parse(text) as { op?: string; run?: number };
  } catch {
    return undefined;
  }
}
