import type pg from 'pg';
import { migrateKeyTable } from 'effectively-once/http';
import { PAYMENT_TABLES } from '../../kit/payments/payments.js';
import { payOnce, type PaymentOutcome } from './client.js';
import type { ArmMode, Contender } from './contenders.js';
import { EXPRESS_IDEMPOTENCY_TABLE } from './express-idempotency-pg.js';
import { NODE_IDEMPOTENCY_TABLE } from './node-idempotency-pg.js';
import { Supervised } from './supervisor.js';

/** Doubles and stuck keys among one kind of payment. */
export interface Tally {
  payments: number;
  /** Keys charged more than once. */
  doubles: number;
  /** Keys charged, never answered 2xx before the client gave up. */
  stuck: number;
  /** Keys answered 2xx with no charge at all. */
  lost: number;
  /** Keys neither charged nor answered 2xx. */
  unanswered: number;
}

/** N identical requests (one key) at once. */
export interface ConcurrentTally {
  requests: number;
  charges: number;
  answered2xx: number;
}

export interface ContenderResult {
  contender: Contender;
  /** Kills that happened where they were armed (after the charge's COMMIT). */
  kills: number;
  killed: Tally;
  dropped: Tally;
  plain: Tally;
  oneProcess: ConcurrentTally;
  twoProcesses: ConcurrentTally;
  seconds: number;
}

export interface ScenarioOptions {
  pool: pg.Pool;
  databaseUrl: string;
  runId: string;
  payments: number;
  concurrent: number;
  log: (line: string) => void;
}

/** Every 5th payment (from the 2nd) is armed to kill, every 5th (from the 4th) to drop its answer. */
export function armOf(index: number): ArmMode | undefined {
  return index % 5 === 1 ? 'kill' : index % 5 === 3 ? 'drop' : undefined;
}

/**
 * The whole scenario for one contender, in a schema of its own: `payments` sequential
 * payments (a fifth killed after COMMIT, a fifth with the answer dropped), then
 * `concurrent` identical requests on one process and on two sharing the store.
 */
export async function runContender(
  contender: Contender,
  options: ScenarioOptions,
): Promise<ContenderResult> {
  const started = Date.now();
  const schema = `compare_${options.runId}_${contender.replace(/[^a-z0-9]+/g, '_')}`;
  const { pool, log } = options;
  await createTables(pool, schema);
  const server = {
    databaseUrl: options.databaseUrl,
    schema,
    env: { COMPARE_CONTENDER: contender },
  };

  const first = await Supervised.start(server);
  const outcomes = new Map<ArmMode | 'plain', PaymentOutcome[]>([
    ['kill', []],
    ['drop', []],
    ['plain', []],
  ]);
  for (let i = 0; i < options.payments; i++) {
    const arm = armOf(i);
    const outcome = await payOnce(
      () => first.port,
      `${contender}/p${i}`,
      arm,
      arm === 'kill' ? () => first.restartAfterKill() : undefined,
    );
    outcomes.get(arm ?? 'plain')?.push(outcome);
    if ((i + 1) % 20 === 0) log(`${contender}: ${i + 1}/${options.payments} payments`);
  }
  const oneKey = `${contender}/concurrent-1`;
  const one = await burst([first.port], oneKey, options.concurrent);
  const second = await Supervised.start(server);
  const twoKey = `${contender}/concurrent-2`;
  const two = await burst([first.port, second.port], twoKey, options.concurrent);
  await Promise.all([first.stop(), second.stop()]);

  const charges = await chargesByKey(pool, schema);
  const concurrentTally = (key: string, answers: PaymentOutcome[]): ConcurrentTally => ({
    requests: answers.length,
    charges: charges.get(key) ?? 0,
    answered2xx: answers.filter((o) => o.answered2xx).length,
  });
  await pool.query(`DROP SCHEMA ${schema} CASCADE`);
  return {
    contender,
    kills: first.kills,
    killed: tally(outcomes.get('kill') ?? [], charges),
    dropped: tally(outcomes.get('drop') ?? [], charges),
    plain: tally(outcomes.get('plain') ?? [], charges),
    oneProcess: concurrentTally(oneKey, one),
    twoProcesses: concurrentTally(twoKey, two),
    seconds: Math.round((Date.now() - started) / 1000),
  };
}

/** The app's and every store's tables, in a schema of their own. */
async function createTables(pool: pg.Pool, schema: string): Promise<void> {
  const client = await pool.connect();
  try {
    await client.query(`CREATE SCHEMA ${schema}`);
    await client.query(`SET search_path = ${schema}`);
    await client.query(PAYMENT_TABLES);
    await client.query(EXPRESS_IDEMPOTENCY_TABLE);
    await client.query(NODE_IDEMPOTENCY_TABLE);
    await client.query('RESET search_path');
  } finally {
    client.release();
  }
  await migrateKeyTable(pool, { schema });
}

/** `n` clients paying with the same key at once, spread over the servers' ports. */
function burst(ports: number[], key: string, n: number): Promise<PaymentOutcome[]> {
  return Promise.all(
    Array.from({ length: n }, (_, i) => payOnce(() => ports[i % ports.length] ?? 0, key)),
  );
}

async function chargesByKey(pool: pg.Pool, schema: string): Promise<Map<string, number>> {
  const { rows } = await pool.query<{ key: string; n: number }>(
    `SELECT idem_key AS key, count(*)::int AS n FROM ${schema}.charges GROUP BY idem_key`,
  );
  return new Map(rows.map((r) => [r.key, r.n]));
}

function tally(outcomes: PaymentOutcome[], charges: Map<string, number>): Tally {
  const n = (o: PaymentOutcome): number => charges.get(o.key) ?? 0;
  return {
    payments: outcomes.length,
    doubles: outcomes.filter((o) => n(o) > 1).length,
    stuck: outcomes.filter((o) => n(o) > 0 && !o.answered2xx).length,
    lost: outcomes.filter((o) => n(o) === 0 && o.answered2xx).length,
    unanswered: outcomes.filter((o) => n(o) === 0 && !o.answered2xx).length,
  };
}
