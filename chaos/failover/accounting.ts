import type pg from 'pg';
import { check, type FinalState, type Verdict } from '../consumer/checker.js';
import { tables } from '../consumer/db.js';
import type { Plan } from '../consumer/plan.js';
import type {
  FailoverCluster,
  FailoverReport,
  XactStatus,
} from '../../kit/services/cluster/cluster.js';
import type { Replication } from '../../kit/services/cluster/node.js';

/** What a run's failovers did, checked against the final state (see chaos/README.md). */
export interface FailoverAccount {
  failovers: number;
  replication: Replication;
  /** Failovers whose arm caught a COMMIT (the rest fired after the wait, or were unarmed). */
  armed: number;
  /** COMMITs the failovers cut in flight or withheld, by what `pg_xact_status` said on the new primary. */
  unknown: Record<XactStatus, number>;
  /** Effect rows a dead primary had committed that the surviving history lacks. */
  vanishedRows: number;
  /** Their keys. */
  vanishedKeys: Set<string>;
  /** Violations (exit 1): an outcome the new primary reported that the final state contradicts. */
  problems: string[];
  /** What could not be read. */
  notes: string[];
}

/**
 * One effect row, as `EffectsQuery` selects it: the run's key it belongs to, its
 * identity across nodes (not a serial id: one may be handed out again after an async
 * failover), and the transaction that inserted it.
 */
interface EffectRow {
  key: string;
  id: string;
  xmin: string;
}

/**
 * A SELECT over a target's effect tables returning `key`, `id` and `xmin` (all text),
 * run on the final primary and on every dead one. Each target names its own.
 */
export type EffectsQuery = string;

/** The broker runs' effects: the ledger, one row per application (by worker pid and time). */
export function ledgerEffects(schema: string): EffectsQuery {
  return `SELECT key, key || '|' || pid || '|' || at::text AS id, xmin::text AS xmin FROM ${tables(schema).ledger}`;
}

/**
 * After the workers stopped: reads the final effects (`effects`: the ledger of the
 * broker runs, the charges of the HTTP run, both services' rows of the outbox run, with
 * each row's inserting transaction, `xmin`) and every dead primary's (started alone,
 * never again behind the proxy), and checks each COMMIT a failover left unknown
 * against them: one the new primary called committed must have its effect in the
 * final state (so the retry found its claim and applied nothing again), one it called
 * aborted must not. Under synchronous replication a COMMIT the old primary answered
 * must be committed on the new one. A dead primary's rows missing from the final state
 * vanished with it: under async replication the acked ones are the documented loss.
 */
export async function accountFailovers(
  cluster: FailoverCluster,
  pool: pg.Pool,
  effects: EffectsQuery,
  reports: FailoverReport[],
): Promise<FailoverAccount> {
  const select = effects;
  const final = (await pool.query<EffectRow>(select)).rows;
  const survived = new Set(final.map((r) => r.id));
  const xmins = new Set(final.map((r) => r.xmin));
  // xmin is the 32-bit xid; the COMMIT's xid8 adds the epoch above it.
  const has = (xid8: string): boolean => xmins.has((BigInt(xid8) % 2n ** 32n).toString());
  const account: FailoverAccount = {
    failovers: reports.length,
    replication: cluster.replication,
    armed: reports.filter((r) => r.caught !== undefined).length,
    unknown: { committed: 0, aborted: 0, 'in progress': 0, 'never replicated': 0 },
    vanishedRows: 0,
    vanishedKeys: new Set(),
    problems: [],
    notes: [],
  };
  for (const report of reports) {
    for (const { xid, status } of report.unknown) {
      account.unknown[status]++;
      // An xid the new primary never saw may be handed out again there: nothing to check.
      if (status === 'committed' && !has(xid))
        account.problems.push(
          `xid ${xid} committed on ${report.to} but none of its effect survived`,
        );
      if (status === 'aborted' && has(xid))
        account.problems.push(`xid ${xid} aborted on ${report.to} yet its effect is there`);
      if (status === 'in progress')
        account.problems.push(`xid ${xid} still in progress on ${report.to} after promotion`);
    }
    const c = report.caught;
    if (
      cluster.replication === 'sync' &&
      c?.arm === 'answered' &&
      c.tag === 'COMMIT' &&
      !report.unknown.some((u) => u.xid === c.xid && u.status === 'committed')
    )
      account.problems.push(
        `xid ${c.xid}: ${report.from} answered COMMIT under synchronous replication, ${report.to} does not have it committed`,
      );
  }
  const dead = await cluster.readRetired<EffectRow>(select).catch((error: unknown) => {
    account.notes.push(`dead primaries unreadable, vanished commits not counted: ${String(error)}`);
    return [];
  });
  const vanished = new Set<string>();
  for (const { rows } of dead)
    for (const row of rows)
      if (!survived.has(row.id) && !vanished.has(row.id)) {
        vanished.add(row.id);
        account.vanishedKeys.add(row.key);
      }
  account.vanishedRows = vanished.size;
  return account;
}

/**
 * The lost keys the run may excuse: under asynchronous replication, those whose effect
 * vanished with a dead primary (acked before the standby had it: the documented
 * window). None under synchronous replication, where any loss fails the run.
 */
export function windowLosses(account: FailoverAccount, lostKeys: readonly string[]): Set<string> {
  if (account.replication !== 'async') return new Set();
  return new Set(lostKeys.filter((k) => account.vanishedKeys.has(k)));
}

/**
 * The checker's verdict, with the lost keys `excuse` accepts (an async failover's
 * window, see {@link windowLosses}) counted in `lost` but raising no problem;
 * `excused` says how many.
 */
export function checkExcusing(
  plan: Plan,
  state: FinalState,
  excuse: ((lostKeys: string[]) => Set<string>) | undefined,
): { verdict: Verdict; excused: number } {
  const verdict = check(plan, state);
  const excused = excuse?.(verdict.lostKeys) ?? new Set<string>();
  if (excused.size === 0) return { verdict, excused: 0 };
  const rest = check({ ...plan, keys: plan.keys.filter((k) => !excused.has(k)) }, state);
  return {
    verdict: { ...rest, lost: verdict.lost, lostKeys: verdict.lostKeys },
    excused: excused.size,
  };
}

/**
 * Into the run's problems and shortfalls: the account's violations become problems
 * (exit 1); failovers that did not happen, or none that caught a COMMIT, shortfalls
 * (exit 3).
 */
export function failoverFindings(
  account: FailoverAccount,
  planned: number,
  problems: string[],
  shortfalls: string[],
  say: (line: string) => void,
): void {
  problems.push(...account.problems);
  for (const note of account.notes) say(`note: ${note}`);
  if (account.failovers < planned)
    shortfalls.push(`failovers: ${account.failovers} of ${planned} happened`);
  if (account.failovers > 0 && account.armed === 0)
    shortfalls.push('no failover caught a COMMIT in flight (every arm timed out)');
  say(
    `failovers: ${account.failovers} (${account.armed} at an armed COMMIT); COMMITs cut in flight: ${JSON.stringify(account.unknown)}; ` +
      `rows that vanished with a dead primary: ${account.vanishedRows} (${account.vanishedKeys.size} keys)`,
  );
}
