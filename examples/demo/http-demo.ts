/**
 * `npm run demo -- --http`: the request side, live. The payment API of
 * examples/http-payments.ts (Hono, the Idempotency-Key middleware, one charge row and
 * the stored response in one transaction) on the embedded Postgres; a fleet of callers
 * using idempotentFetch reach it through a flaky TCP proxy that drops responses after
 * the server committed, resets connections and holds responses past the caller's
 * timeout. Every caller retries with its one key and the same bytes; the ledger must
 * show one charge per key, and every caller the stored response.
 */
import pLimit from 'p-limit';
import pg from 'pg';
import { idempotentFetch } from 'effectively-once/client';
import { FaultProxy, type Fault } from '../../kit/fault-proxy.js';
import { main as paymentApi } from '../http-payments.js';
import { startDatabase } from './services.js';

export interface HttpDemoOptions {
  payments: number;
  seed: number;
}

/** One caller's logical payment and what it got. */
interface Payment {
  key: string;
  customerId: string;
  amountCents: number;
  attempts: number;
  status?: number;
  body?: string;
  replayed?: boolean;
}

const ATTEMPT_TIMEOUT_MS = 800;

/** Resolves true when the ledger shows every payment charged exactly once. */
export async function runHttpDemo(options: HttpDemoOptions): Promise<boolean> {
  const started = Date.now();
  const say = (text: string) => process.stderr.write(`${text}\n`);
  say(`effectively-once HTTP demo: ${options.payments} payments (seed ${options.seed})`);
  const db = await startDatabase();
  // The example API creates its table where search_path points: the demo's schema.
  const url = new URL(db.url);
  url.searchParams.set('options', `-c search_path=${db.schema}`);
  const admin = new pg.Pool({ connectionString: url.toString(), max: 2 });
  admin.on('error', () => undefined);
  const stop = new AbortController();
  // One tenant per run: its keys are its own in a shared key table.
  const tenant = `demo-${db.schema}`;
  let server: Promise<void> | undefined;
  let proxy: FaultProxy | undefined;
  try {
    await admin.query(`CREATE SCHEMA IF NOT EXISTS ${db.schema}`);
    const base = await new Promise<string>((resolve, reject) => {
      server = paymentApi({
        signal: stop.signal,
        env: { DATABASE_URL: url.toString(), PORT: '0' },
        onListening: resolve,
      });
      server.catch(reject);
    });
    proxy = await FaultProxy.start({
      target: { host: '127.0.0.1', port: Number(new URL(base).port) },
      faults: { drop: 0.2, reset: 0.1, delay: 0.1 },
      seed: options.seed,
      delayMs: ATTEMPT_TIMEOUT_MS + 300,
      maxFaultsPerKey: 3,
    });
    say(`  payment API (examples/http-payments.ts) on ${db.description}, ${base}`);
    say(
      `  callers reach it through a flaky proxy (${proxy.url}): 20 % responses dropped after COMMIT, ` +
        `10 % connections reset, 10 % responses held past the ${ATTEMPT_TIMEOUT_MS} ms attempt timeout`,
    );

    const payments: Payment[] = Array.from({ length: options.payments }, (_, i) => ({
      key: `pay-${options.seed}-${i}`,
      customerId: `cus_${i}`,
      amountCents: 100 + ((i * 7919 + options.seed) % 9900),
      attempts: 0,
    }));
    const limit = pLimit(16);
    await Promise.all(payments.map((p) => limit(() => pay(p, proxy!.url, tenant))));

    // The same request once more, straight to the server: the stored answer, replayed.
    const example = pickExample(payments, proxy.exchanges) ?? payments[0]!;
    const again = await idempotentFetch(
      new URL('/charges', base),
      { method: 'POST', headers: { 'x-tenant': tenant } },
      {
        key: example.key,
        json: { customerId: example.customerId, amountCents: example.amountCents },
      },
    );
    const againBody = await again.response.text();

    const ledger = await admin.query<{
      n: string;
      customers: string;
      twice: string;
      total: string;
    }>(
      `SELECT count(*) AS n, count(DISTINCT customer_id) AS customers,
              count(*) - count(DISTINCT customer_id) AS twice, coalesce(sum(amount_cents), 0) AS total
         FROM charges WHERE tenant = $1`,
      [tenant],
    );
    const row = ledger.rows[0];
    const applied = Number(row?.n ?? 0);
    const twice = Number(row?.twice ?? 0);
    const total = Number(row?.total ?? 0);
    const expectedTotal = payments.reduce((sum, p) => sum + p.amountCents, 0);
    const answered = payments.filter((p) => p.status === 201).length;
    const chargeIds = new Set(payments.map((p) => chargeId(p.body)));
    return report({
      payments,
      faults: proxy.counts(),
      applied,
      twice,
      total,
      expectedTotal,
      answered,
      distinctAnswers: chargeIds.size,
      example,
      again: { replayed: again.replayed, body: againBody },
      seconds: (Date.now() - started) / 1000,
      title: `effectively-once HTTP demo: examples/http-payments.ts on ${db.description}`,
    });
  } finally {
    stop.abort();
    await proxy?.close();
    await server?.catch(() => undefined);
    if (db.shared) {
      await admin.query(`DROP SCHEMA IF EXISTS ${db.schema} CASCADE`).catch(() => undefined);
      await admin
        .query('DELETE FROM public.eo_idempotency_keys WHERE scope = $1', [tenant])
        .catch(() => undefined);
    }
    await admin.end().catch(() => undefined);
    await db.stop();
  }
}

/** One logical payment: one key, one body, retried by idempotentFetch until it gets an answer. */
async function pay(payment: Payment, url: string, tenant: string): Promise<void> {
  const { response, attempts, replayed } = await idempotentFetch(
    new URL('/charges', url),
    { method: 'POST', headers: { 'x-tenant': tenant } },
    {
      key: payment.key,
      json: { customerId: payment.customerId, amountCents: payment.amountCents },
      attempts: 10,
      attemptTimeoutMs: ATTEMPT_TIMEOUT_MS,
      backoff: { initialMs: 50, maxMs: 500 },
    },
  );
  payment.attempts = attempts;
  payment.status = response.status;
  payment.body = await response.text();
  payment.replayed = replayed;
}

/** A payment whose first response was dropped after the server committed, then replayed. */
function pickExample(
  payments: Payment[],
  exchanges: readonly { key: string | undefined; occurrence: number; fault: Fault }[],
): Payment | undefined {
  const droppedFirst = new Set(
    exchanges.filter((e) => e.occurrence === 0 && e.fault === 'drop').map((e) => e.key),
  );
  return payments.find((p) => droppedFirst.has(p.key) && p.replayed === true);
}

function chargeId(body: string | undefined): string | undefined {
  try {
    return (JSON.parse(body ?? '') as { id?: string }).id;
  } catch {
    return undefined;
  }
}

interface Figures {
  title: string;
  payments: Payment[];
  faults: Record<Fault, number>;
  applied: number;
  twice: number;
  total: number;
  expectedTotal: number;
  answered: number;
  distinctAnswers: number;
  example: Payment;
  again: { replayed: boolean; body: string };
  seconds: number;
}

const euros = (cents: number) =>
  `€${(cents / 100).toLocaleString('en-US', { minimumFractionDigits: 2, maximumFractionDigits: 2 })}`;

/** Prints the result table to stdout; returns whether every check passed. */
function report(f: Figures, out: NodeJS.WriteStream = process.stdout): boolean {
  const n = f.payments.length;
  const attempts = f.payments.reduce((sum, p) => sum + p.attempts, 0);
  const replayed = f.payments.filter((p) => p.replayed).length;
  const checks = {
    answered: f.answered === n,
    applied: f.applied === n,
    twice: f.twice === 0,
    total: f.total === f.expectedTotal,
    distinct: f.distinctAnswers === n,
    replay: f.again.replayed && f.again.body === f.example.body,
  };
  const mark = (ok: boolean) => (ok ? 'ok' : 'FAIL');
  const rows: Array<[string, string, string]> = [
    ['logical payments (N), one key each', String(n), ''],
    [
      'HTTP attempts by the callers',
      String(attempts),
      `${attempts - n} retries, same key and bytes`,
    ],
    ['responses dropped after the COMMIT', String(f.faults.drop), 'by the proxy'],
    ['connections reset before the request', String(f.faults.reset), 'by the proxy'],
    ['responses held past the attempt timeout', String(f.faults.delay), 'by the proxy'],
    ['final answers that were replays', String(replayed), 'Idempotent-Replayed: true'],
    ['callers answered 201', String(f.answered), `${mark(checks.answered)}: expected ${n}`],
    ['charges applied', String(f.applied), `${mark(checks.applied)}: expected ${n}`],
    ['charged more than once', String(f.twice), `${mark(checks.twice)}: expected 0`],
    [
      'total amount charged',
      euros(f.total),
      `${mark(checks.total)}: expected ${euros(f.expectedTotal)}`,
    ],
    [
      'distinct charges in the answers',
      String(f.distinctAnswers),
      `${mark(checks.distinct)}: expected ${n}`,
    ],
  ];
  const w0 = Math.max(...rows.map((r) => r[0].length));
  const w1 = Math.max(...rows.map((r) => r[1].length));
  const w2 = Math.max(...rows.map((r) => r[2].length));
  const rule = `+${'-'.repeat(w0 + 2)}+${'-'.repeat(w1 + 2)}+${'-'.repeat(w2 + 2)}+`;
  const pass = Object.values(checks).every(Boolean);
  out.write(
    [
      '',
      f.title,
      rule,
      ...rows.map(([a, b, c]) => `| ${a.padEnd(w0)} | ${b.padStart(w1)} | ${c.padEnd(w2)} |`),
      rule,
      `replayed response, ${f.example.key} (${f.example.attempts} attempts; sent again afterwards):`,
      `  first caller got: ${f.example.body ?? '(nothing)'}`,
      `  sent again:       ${f.again.body}  Idempotent-Replayed: ${String(f.again.replayed)}` +
        `  ${mark(checks.replay)}: byte-identical`,
      pass
        ? `PASS: ${n} payments charged exactly once in ${f.seconds.toFixed(1)} s, although ${attempts} HTTP attempts were made.`
        : `FAIL: the ledger does not match the ${n} payments (see the rows marked FAIL).`,
      '',
    ].join('\n'),
  );
  return pass;
}
