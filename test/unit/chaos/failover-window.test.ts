/**
 * The async failover window (chaos/failover/accounting.ts): under asynchronous
 * replication, lost keys that vanished with a dead primary are counted (lost=,
 * window_lost=) and raise no problem; any other loss, and any loss under synchronous
 * replication, still does (exit 1 in chaos/consumer/summary.ts).
 */
import { describe, expect, it } from '@jest/globals';
import type { FinalState } from '../../../chaos/consumer/checker.js';
import {
  checkExcusing,
  windowLosses,
  type FailoverAccount,
} from '../../../chaos/failover/accounting.js';
import type { Replication } from '../../../kit/services/cluster/node.js';
import { makePlan } from '../../../chaos/consumer/plan.js';
import { Rng } from '../../../kit/rng.js';
import { exitCode, type RunResult } from '../../../chaos/consumer/summary.js';

const plan = makePlan(new Rng(23), 50, 0.25, 0, { count: 0, kinds: [] });

/** Every key applied once but `missing`. */
function state(missing: string[]): FinalState {
  const counters = new Map(plan.keys.filter((k) => !missing.includes(k)).map((k) => [k, 1]));
  return {
    counters,
    ledger: new Map(counters),
    ledgerRows: counters.size,
    deadLetters: [],
    hotTotal: 0,
    quiescent: true,
  };
}

function account(replication: Replication, vanished: string[]): FailoverAccount {
  return {
    failovers: 1,
    replication,
    armed: 1,
    unknown: { committed: 0, aborted: 0, 'in progress': 0, 'never replicated': 0 },
    vanishedRows: vanished.length,
    vanishedKeys: new Set(vanished),
    problems: [],
    notes: [],
  };
}

/** The exit code of a run whose final state is `s` with failover account `a`. */
function exit(a: FailoverAccount, s: FinalState): { code: number; lost: number; excused: number } {
  const { verdict, excused } = checkExcusing(plan, s, (lost) => windowLosses(a, lost));
  const result = {
    verdict,
    timedOut: false,
    shortfalls: [],
    failover: { account: a, windowLost: excused, commitUnknownRetries: 0 },
  } as unknown as RunResult;
  return { code: exitCode(result), lost: verdict.lost, excused };
}

describe('the async failover window', () => {
  const [a, b, c] = plan.keys as [string, string, string];

  it('async: losses that vanished with a dead primary are counted, not failed', () => {
    expect(exit(account('async', [a, b, c]), state([a, b]))).toEqual({
      code: 0,
      lost: 2,
      excused: 2,
    });
  });

  it('async: a loss that did not vanish with a primary fails the run', () => {
    expect(exit(account('async', [a]), state([a, b]))).toEqual({ code: 1, lost: 2, excused: 1 });
  });

  it('sync: every loss fails the run, vanished or not', () => {
    expect(exit(account('sync', [a, b]), state([a, b]))).toEqual({ code: 1, lost: 2, excused: 0 });
  });
});
