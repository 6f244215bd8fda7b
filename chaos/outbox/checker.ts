import type pg from 'pg';
import { outboxRef, outboxRelations } from '../../src/outbox/table.js';
import type { EffectsQuery } from '../failover/accounting.js';
import { outboxTables } from './shared.js';

/** What the outbox checker found; `problems` name example operations. */
export interface OutboxVerdict {
  /** Operations service B applied at least once. */
  applied: number;
  /** Operations applied more than once by A or by B. */
  doubles: number;
  /** Operations missing from A's or B's effects. */
  lost: number;
  /** Of them, those excused (an async failover's window): counted, not failed. */
  windowLost: number;
  /** Adjacent pairs of B's apply order, per account, whose sequence does not rise by one. */
  orderViolations: number;
  problems: string[];
}

interface Row {
  op: string;
  account: string;
  /** A's sequence number of the operation (B's rows get A's, by operation). */
  seq: number;
}

/**
 * Reads both services' effects: every operation `op-0 … op-(N-1)` applied exactly once
 * by A and once by B, to the same account; per account, B's apply order (its ledger's
 * serial id) is the sequence 1, 2, 3 … of A's commits (the account counter A took after
 * its enqueue and held until COMMIT); no outbox row failed for want of a publisher (a
 * relay claimed another destination set's row). `excuse` picks, among the lost
 * operations, those an async failover's window accounts for: they count in `lost`,
 * raise no problem, and their rows are left out of the order check.
 */
export async function checkOutbox(
  pool: pg.Pool,
  schema: string,
  operations: number,
  excuse: (lost: string[]) => ReadonlySet<string> = () => new Set(),
): Promise<OutboxVerdict> {
  const t = outboxTables(schema);
  const a = (await pool.query<Row>(`SELECT op, account, seq FROM ${t.aEffects} ORDER BY id`)).rows;
  const aSeq = new Map(a.map((row) => [row.op, row.seq]));
  const b = (
    await pool.query<Omit<Row, 'seq'>>(`SELECT op, account FROM ${t.bApplied} ORDER BY id`)
  ).rows.map((row) => ({ ...row, seq: aSeq.get(row.op) ?? -1 }));
  const problems: string[] = [];
  const byOp = (rows: Row[]): Map<string, Row[]> => {
    const map = new Map<string, Row[]>();
    for (const row of rows) map.set(row.op, [...(map.get(row.op) ?? []), row]);
    return map;
  };
  const aOps = byOp(a);
  const bOps = byOp(b);
  const doubled = new Set<string>();
  const lost = new Set<string>();
  const mismatched: string[] = [];
  for (let i = 0; i < operations; i++) {
    const op = `op-${i}`;
    const inA = aOps.get(op) ?? [];
    const inB = bOps.get(op) ?? [];
    if (inA.length > 1 || inB.length > 1) doubled.add(op);
    if (inA.length === 0 || inB.length === 0) lost.add(op);
    const first = inA[0];
    if (first !== undefined && inB.some((r) => r.account !== first.account)) mismatched.push(op);
  }
  const unknown = [...aOps.keys(), ...bOps.keys()].filter(
    (op) => !/^op-\d+$/.test(op) || Number(op.slice(3)) >= operations,
  );
  const excused = excuse([...lost]);
  const lostCount = lost.size;
  for (const op of excused) lost.delete(op);
  const violations: string[] = [];
  const last = new Map<string, number>();
  for (const row of b) {
    if (excused.has(row.op)) continue;
    const before = last.get(row.account) ?? 0;
    if (row.seq !== before + 1) violations.push(`${row.account}: ${before} then ${row.seq}`);
    last.set(row.account, row.seq);
  }
  const foreign = (
    await pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM ${outboxRelations(outboxRef({ schema })).table}
        WHERE strpos(last_error, 'no publisher') > 0`,
    )
  ).rows[0]?.n;
  const sample = (items: Iterable<string>): string => [...items].slice(0, 5).join(', ');
  if (doubled.size > 0)
    problems.push(`applied more than once: ${doubled.size} (${sample(doubled)})`);
  if (lost.size > 0) problems.push(`never applied by A or B: ${lost.size} (${sample(lost)})`);
  if (mismatched.length > 0)
    problems.push(`B got another account than A: ${mismatched.length} (${sample(mismatched)})`);
  if (unknown.length > 0) problems.push(`effects nobody asked for: ${sample(unknown)}`);
  if (violations.length > 0)
    problems.push(`out of order in B: ${violations.length} (${sample(violations)})`);
  if (foreign !== 0) problems.push(`rows failed by a relay without their publisher: ${foreign}`);
  return {
    applied: bOps.size,
    doubles: doubled.size,
    lost: lostCount,
    windowLost: excused.size,
    orderViolations: violations.length,
    problems,
  };
}

/**
 * The outbox run's effects for the failover accounting (chaos/failover/accounting.ts):
 * A's and B's rows, keyed by operation.
 */
export function outboxEffects(schema: string): EffectsQuery {
  const t = outboxTables(schema);
  return `SELECT op AS key, 'a|' || op || '|' || pid || '|' || seq || '|' || id AS id, xmin::text AS xmin FROM ${t.aEffects}
    UNION ALL SELECT op, 'b|' || op || '|' || outbox_id || '|' || pid || '|' || id, xmin::text FROM ${t.bApplied}`;
}

/** Operations A and B have applied so far (progress); undefined while Postgres is down. */
export async function progress(
  pool: pg.Pool,
  schema: string,
): Promise<{ a: number; b: number } | undefined> {
  const t = outboxTables(schema);
  try {
    const { rows } = await pool.query<{ a: number; b: number }>(
      `SELECT (SELECT count(DISTINCT op) FROM ${t.aEffects})::int AS a,
              (SELECT count(DISTINCT op) FROM ${t.bApplied})::int AS b`,
    );
    return rows[0];
  } catch {
    return undefined;
  }
}
