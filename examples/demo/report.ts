import type { Pool } from 'pg';
import type { Plan } from './producer.js';

/** Everything the final table shows, gathered by main.ts. */
export interface RunFigures {
  title: string;
  plan: Plan;
  messagesSent: number;
  resends: number;
  deliveries: number;
  duplicates: number;
  retries: number;
  abandoned: number;
  /** One line per fault injected. */
  faults: string[];
  leftPending: number;
  leftDead: number;
  seconds: number;
}

/** What the ledger says. */
export interface Ledger {
  applied: number;
  distinct: number;
  chargedTwice: number;
  totalCents: number;
  accountsOff: number;
}

/** Reads the payment tables: the ground truth, independent of any counter. */
export async function readLedger(pool: Pool, plan: Plan): Promise<Ledger> {
  const { rows } = await pool.query<{ applied: string; distinct: string; total: string | null }>(
    'SELECT count(*) AS applied, count(DISTINCT charge_id) AS distinct, sum(amount_cents) AS total FROM charges',
  );
  const twice = await pool.query<{ n: string }>(
    'SELECT count(*) AS n FROM (SELECT charge_id FROM charges GROUP BY charge_id HAVING count(*) > 1) d',
  );
  const balances = await pool.query<{ id: string; balance: string }>(
    'SELECT id, balance_cents AS balance FROM accounts',
  );
  const accountsOff = balances.rows.filter(
    (r) => -Number(r.balance) !== (plan.expectedByAccount.get(r.id) ?? 0),
  ).length;
  const row = rows[0];
  return {
    applied: Number(row?.applied ?? 0),
    distinct: Number(row?.distinct ?? 0),
    chargedTwice: Number(twice.rows[0]?.n ?? 0),
    totalCents: Number(row?.total ?? 0),
    accountsOff,
  };
}

const euros = (cents: number) =>
  `€${(cents / 100).toLocaleString('en-US', { minimumFractionDigits: 2, maximumFractionDigits: 2 })}`;

/** Prints the table to stdout; returns whether every check passed. */
export function printReport(
  f: RunFigures,
  ledger: Ledger,
  out: NodeJS.WriteStream = process.stdout,
): boolean {
  const n = f.plan.charges.length;
  const checks = {
    applied: ledger.applied === n && ledger.distinct === n,
    twice: ledger.chargedTwice === 0,
    total: ledger.totalCents === f.plan.expectedTotalCents,
    accounts: ledger.accountsOff === 0,
    drained: f.leftPending === 0 && f.leftDead === 0,
  };
  const mark = (ok: boolean) => (ok ? 'ok' : 'FAIL');
  const rows: Array<[string, string, string]> = [
    ['logical charges (N)', String(n), ''],
    [
      'messages sent (with producer resends)',
      String(f.messagesSent),
      `${f.resends} resends, same idempotency key`,
    ],
    ['deliveries received by workers', String(f.deliveries), ''],
    ['duplicates skipped', String(f.duplicates), ''],
    ['retried later (claim busy, rolled back)', String(f.retries), ''],
    ['in flight in the killed worker', String(f.abandoned), 'rolled back, delivered again'],
    ['charges applied', String(ledger.applied), `${mark(checks.applied)}: expected ${n}`],
    ['charged more than once', String(ledger.chargedTwice), `${mark(checks.twice)}: expected 0`],
    [
      'total amount charged',
      euros(ledger.totalCents),
      `${mark(checks.total)}: expected ${euros(f.plan.expectedTotalCents)}`,
    ],
    [
      'account balances',
      ledger.accountsOff === 0 ? 'all match' : `${ledger.accountsOff} off`,
      mark(checks.accounts),
    ],
    ['left unprocessed / dead-lettered', `${f.leftPending} / ${f.leftDead}`, mark(checks.drained)],
  ];
  const w0 = Math.max(...rows.map((r) => r[0].length));
  const w1 = Math.max(...rows.map((r) => r[1].length));
  const w2 = Math.max(...rows.map((r) => r[2].length));
  const rule = `+${'-'.repeat(w0 + 2)}+${'-'.repeat(w1 + 2)}+${'-'.repeat(w2 + 2)}+`;
  const pass = Object.values(checks).every(Boolean);
  const lines = [
    '',
    f.title,
    rule,
    ...rows.map(([a, b, c]) => `| ${a.padEnd(w0)} | ${b.padStart(w1)} | ${c.padEnd(w2)} |`),
    rule,
    ...f.faults.map((fault, i) => `${i === 0 ? 'faults injected:' : '                '} ${fault}`),
    pass
      ? `PASS: ${n} charges applied exactly once in ${f.seconds.toFixed(1)} s, although ${f.deliveries} deliveries arrived.`
      : `FAIL: the ledger does not match the ${n} logical charges (see the rows marked FAIL).`,
    '',
  ];
  out.write(lines.join('\n'));
  return pass;
}
