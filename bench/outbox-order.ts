/**
 * The cost of the outbox's commit order (issue 21), for `bench/outbox.ts`: business
 * transactions per second that each write an effect and enqueue one row, from
 * `writers` connections at once, with `enqueue`'s key lock (`order: 'commit'`, the
 * default) and without it (`order: 'enqueue'`), on one hot ordering key and on keys
 * spread out. Modes interleave round by round; each ratio is the median of the rounds'
 * ratios, so a busier moment of the machine moves both sides of it.
 */
import pg from 'pg';
import { enqueue, type EnqueueOptions } from '../src/outbox/index.js';
import { median, medianRoundRatio, percentile } from './stats.js';

/** Keys the spread-out modes cycle through. */
const SPREAD_KEYS = 1000;

const MODES = ['hot-commit', 'hot-enqueue', 'spread-commit', 'spread-enqueue'] as const;
type OrderMode = (typeof MODES)[number];

/** One mode's run in one round. */
export interface OrderCostRun {
  mode: OrderMode;
  round: number;
  /** Committed transactions per second. */
  tps: number;
  /** Transaction latency (BEGIN to COMMIT returned), ms. */
  p50: number;
  p99: number;
}

/** What {@link orderCost} runs. */
export interface OrderCostOptions {
  schema: string;
  /** Concurrent connections, each running transactions back to back. */
  writers: number;
  /** Transactions per mode and round, over all writers. */
  transactions: number;
  rounds: number;
}

/** Runs every mode `rounds` times, interleaved. */
export async function orderCost(pool: pg.Pool, o: OrderCostOptions): Promise<OrderCostRun[]> {
  const effects = `${o.schema}.order_effects`;
  await pool.query(`CREATE TABLE IF NOT EXISTS ${effects} (n bigint NOT NULL, k text NOT NULL)`);
  const runs: OrderCostRun[] = [];
  for (let round = 1; round <= o.rounds; round++) {
    for (const mode of MODES) {
      await pool.query(`TRUNCATE ${o.schema}.eo_outbox, ${effects}`);
      runs.push({ mode, round, ...(await oneRun(pool, o, mode, effects)) });
    }
  }
  return runs;
}

async function oneRun(
  pool: pg.Pool,
  o: OrderCostOptions,
  mode: OrderMode,
  effects: string,
): Promise<{ tps: number; p50: number; p99: number }> {
  const options: EnqueueOptions = {
    schema: o.schema,
    order: mode.endsWith('-commit') ? 'commit' : 'enqueue',
  };
  const keyOf = (n: number): string => (mode.startsWith('hot') ? 'hot' : `k${n % SPREAD_KEYS}`);
  const latencies: number[] = [];
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: o.writers }, async () => {
      const client = await pool.connect();
      try {
        for (let n = next++; n < o.transactions; n = next++) {
          const t0 = performance.now();
          const k = keyOf(n);
          // The effect first, the outbox row last: the key's lock is held for the
          // shortest time a caller can give it (enqueue → COMMIT).
          await client.query('BEGIN');
          await client.query(`INSERT INTO ${effects} (n, k) VALUES ($1, $2)`, [n, k]);
          await enqueue(client, { destination: 'd', orderingKey: k, payload: { n } }, options);
          await client.query('COMMIT');
          latencies.push(performance.now() - t0);
        }
      } finally {
        client.release();
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  return {
    tps: o.transactions / seconds,
    p50: percentile(latencies, 0.5) ?? NaN,
    p99: percentile(latencies, 0.99) ?? NaN,
  };
}

/** The report's section: each mode's medians, and the cost of the lock as ratios. */
export function orderCostLines(runs: readonly OrderCostRun[], o: OrderCostOptions): string[] {
  const med = (mode: OrderMode, field: 'tps' | 'p50' | 'p99'): number =>
    median(runs.filter((r) => r.mode === mode).map((r) => r[field])) ?? NaN;
  const ratio = (num: OrderMode, den: OrderMode): string =>
    (medianRoundRatio(runs, (r) => r.tps, num, den) ?? NaN).toFixed(2);
  const fmt = (n: number): string => Math.round(n).toLocaleString('en-US');
  const row = (mode: OrderMode, label: string): string =>
    `| ${label} | ${runs
      .filter((r) => r.mode === mode)
      .map((r) => fmt(r.tps))
      .join(
        ', ',
      )} | ${fmt(med(mode, 'tps'))} | ${med(mode, 'p50').toFixed(1)} | ${med(mode, 'p99').toFixed(1)} |`;
  return [
    `## The cost of commit order`,
    '',
    `${o.writers} connections each run transactions back to back (BEGIN, an INSERT, \`enqueue\`,`,
    `COMMIT), ${o.transactions} per mode and round, ${o.rounds} interleaved rounds; medians.`,
    '',
    '| transactions | tx/s (each round) | tx/s | p50 ms | p99 ms |',
    '| --- | --- | --- | --- | --- |',
    row('hot-commit', "one hot key, `order: 'commit'` (default)"),
    row('hot-enqueue', "one hot key, `order: 'enqueue'`"),
    row('spread-commit', `${SPREAD_KEYS} keys, \`order: 'commit'\` (default)`),
    row('spread-enqueue', `${SPREAD_KEYS} keys, \`order: 'enqueue'\``),
    '',
    `Commit order / enqueue order, tx/s (median of the rounds' ratios): one hot key ${ratio('hot-commit', 'hot-enqueue')},`,
    `${SPREAD_KEYS} keys ${ratio('spread-commit', 'spread-enqueue')}.`,
    '',
  ];
}
