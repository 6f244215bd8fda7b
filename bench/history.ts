import type pg from 'pg';
import { migrate } from 'effectively-once';
import type { BrokerName } from '../kit/services/private.js';
import { CONSUMER_NAME, createPool, RUN_ROWS } from './db.js';

/**
 * The dedup-growth runs' `processed_messages`: M rows of the runs' own consumer's
 * history, loaded once per bench invocation and kept across its runs (only each run's
 * own rows are deleted between runs), so 10 million rows cost one load, not one per run.
 */
export const HISTORY_SCHEMA = 'eo_bench_history';
const TABLE = `${HISTORY_SCHEMA}.processed_messages`;
const META = `${HISTORY_SCHEMA}.history_meta`;

const DAY_MS = 86_400_000;
/** History spans processed_at from 30 days ago (g = 1) to 1 day ago (g = M), increasing with g. */
const OLDEST_DAYS = 30;
const NEWEST_DAYS = 1;
/** Rows inserted per statement while loading; one progress line each. */
const CHUNK = 1_000_000;

/**
 * History keys in the shape of the run's own keys, so a run's claims land between old
 * keys all over the index, as a real consumer's new keys do, instead of in a subtree
 * of their own at one end of it. Neither shape can equal a run key.
 */
const KEYS: Record<BrokerName, { key: string; from: string }> = {
  // Kafka runs (and e, g) claim 'msg-<id>': each sorts just before its twin 'msg-<id>-h',
  // so consecutive run keys sit about a leaf page apart across the whole index.
  kafka: { key: `'msg-' || g || '-h'`, from: '' },
  // RabbitMQ runs claim the message-id the prefill sets, 'msg-<id>' as Kafka's.
  rabbitmq: { key: `'msg-' || g || '-h'`, from: '' },
  // SQS runs claim MessageIds, random version-4 UUIDs: these are UUID-shaped with version
  // nibble 0, and run keys fall at random among them.
  sqs: {
    key: `substr(h, 1, 8) || '-' || substr(h, 9, 4) || '-0' || substr(h, 14, 3) || '-' || substr(h, 17, 4) || '-' || substr(h, 21, 12)`,
    from: ', md5(g::text) AS h',
  },
};

/** A pool or one of its clients (the load needs one session for its settings). */
interface Db {
  query<R extends pg.QueryResultRow>(text: string, values?: unknown[]): Promise<pg.QueryResult<R>>;
}

/** How the history was generated: enough to regenerate any of its rows exactly. */
export interface HistoryMeta {
  rows: number;
  family: BrokerName;
  /** processed_at of g = 1, ISO. */
  base: string;
  /** processed_at step from one g to the next, in µs. */
  stepUs: number;
}

async function readMeta(db: Db): Promise<HistoryMeta> {
  const { rows } = await db.query<{
    rows: string;
    family: BrokerName;
    base: Date;
    step_us: string;
  }>(`SELECT rows, family, base, step_us FROM ${META}`);
  const row = rows[0];
  if (row === undefined) throw new Error(`bench: ${META} is empty; the parent preloads it`);
  return {
    rows: Number(row.rows),
    family: row.family,
    base: row.base.toISOString(),
    stepUs: Number(row.step_us),
  };
}

/** Inserts history rows g = from..to in g order (processed_at order, as a real table fills); existing keys are skipped. */
async function insertRange(db: Db, meta: HistoryMeta, from: number, to: number): Promise<void> {
  await db.query(
    `INSERT INTO ${TABLE} (consumer, message_key, payload_hash, processed_at)
     SELECT $1, ${KEYS[meta.family].key}, sha256(g::text::bytea),
            $4::timestamptz + (g - 1) * $5::bigint * interval '1 microsecond'
       FROM generate_series($2::bigint, $3::bigint) AS g${KEYS[meta.family].from}
     ON CONFLICT DO NOTHING`,
    [CONSUMER_NAME, from, to, meta.base, meta.stepUs],
  );
}

/**
 * Creates the history schema with the library's `migrate` and fills it with `rows`
 * rows of consumer CONSUMER_NAME. Indexes are dropped for the load and rebuilt from
 * their own definitions afterwards: the heap stays in processed_at order (as a table
 * that filled over 30 days is) and the load takes about half the time of inserting
 * into the indexes.
 */
export async function preloadHistory(
  databaseUrl: string,
  rows: number,
  family: BrokerName,
): Promise<void> {
  const pool = createPool(databaseUrl, 1);
  const started = performance.now();
  const log = (what: string): void =>
    console.log(
      `[bench] dedup history: ${what} (${Math.round((performance.now() - started) / 1000)} s)`,
    );
  try {
    await pool.query(`DROP SCHEMA IF EXISTS ${HISTORY_SCHEMA} CASCADE`);
    await migrate(pool, { schema: HISTORY_SCHEMA });
    const db = await pool.connect();
    try {
      const spanUs = (OLDEST_DAYS - NEWEST_DAYS) * DAY_MS * 1000;
      await db.query(
        `CREATE TABLE ${META} (rows bigint NOT NULL, family text NOT NULL, base timestamptz NOT NULL, step_us bigint NOT NULL)`,
      );
      await db.query(
        `INSERT INTO ${META} VALUES ($1, $2, date_trunc('second', now()) - $3 * interval '1 day', $4)`,
        [rows, family, OLDEST_DAYS, Math.max(1, Math.floor(spanUs / Math.max(1, rows - 1)))],
      );
      const meta = await readMeta(db);
      const rebuild = await dropIndexes(db);
      for (let from = 1; from <= rows; from += CHUNK) {
        const to = Math.min(rows, from + CHUNK - 1);
        await insertRange(db, meta, from, to);
        log(`${to.toLocaleString('en-US')} / ${rows.toLocaleString('en-US')} rows`);
      }
      // The primary key's sort is the long step; more memory keeps it off disk.
      await db.query(`SET maintenance_work_mem = '512MB'`);
      for (const statement of rebuild) await db.query(statement);
      log('indexes rebuilt');
      await db.query(`RESET maintenance_work_mem`);
      await db.query(`VACUUM ANALYZE ${TABLE}`);
      log('vacuumed and analyzed; ready');
    } finally {
      db.release();
    }
  } finally {
    await pool.end();
  }
}

/** Drops the table's constraints and indexes; returns the statements that recreate them as they were. */
async function dropIndexes(db: Db): Promise<string[]> {
  const constraints = await db.query<{ name: string; def: string }>(
    `SELECT conname AS name, pg_get_constraintdef(oid) AS def FROM pg_constraint
      WHERE conrelid = $1::regclass AND contype IN ('p', 'u')`,
    [TABLE],
  );
  const indexes = await db.query<{ name: string; def: string }>(
    `SELECT indexname AS name, indexdef AS def FROM pg_indexes
      WHERE schemaname = $1 AND tablename = 'processed_messages'
        AND indexname <> ALL($2::text[])`,
    [HISTORY_SCHEMA, constraints.rows.map((c) => c.name)],
  );
  for (const c of constraints.rows)
    await db.query(`ALTER TABLE ${TABLE} DROP CONSTRAINT ${quote(c.name)}`);
  for (const i of indexes.rows) await db.query(`DROP INDEX ${HISTORY_SCHEMA}.${quote(i.name)}`);
  return [
    ...constraints.rows.map((c) => `ALTER TABLE ${TABLE} ADD CONSTRAINT ${quote(c.name)} ${c.def}`),
    ...indexes.rows.map((i) => i.def),
  ];
}

const quote = (name: string): string => `"${name.replaceAll('"', '""')}"`;

async function countHistory(db: Db): Promise<number> {
  const { rows } = await db.query<{ n: string }>(
    `SELECT count(*) AS n FROM ${TABLE} WHERE consumer = $1`,
    [CONSUMER_NAME],
  );
  return Number(rows[0]?.n ?? 0);
}

/**
 * Brings the history table back to its loaded state before a dedup-growth run: deletes
 * the previous run's own rows (recent ones: history is at least a day old) and, when a
 * pruning run deleted history, re-inserts exactly the missing rows. The pruner deletes
 * in whatever order its plan reads the table, so the gaps are found from the rows that
 * are left (one pass over the processed_at index), not assumed to be the oldest ones.
 */
export async function resetHistory(db: Db): Promise<void> {
  const meta = await readMeta(db);
  await db.query(`DELETE FROM ${TABLE} WHERE consumer = $1 AND ${RUN_ROWS}`, [CONSUMER_NAME]);
  await db.query(`VACUUM ${TABLE}`);
  if ((await countHistory(db)) === meta.rows) return;
  const g = `(round(extract(epoch FROM processed_at - $2::timestamptz) * 1000000 / $3::bigint) + 1)::bigint`;
  await db.query(
    `INSERT INTO ${TABLE} (consumer, message_key, payload_hash, processed_at)
     SELECT $1, ${KEYS[meta.family].key}, sha256(g::text::bytea),
            $2::timestamptz + (g - 1) * $3::bigint * interval '1 microsecond'
       FROM (SELECT lag(g, 1, 0::bigint) OVER (ORDER BY processed_at) + 1 AS lo, g - 1 AS hi
               FROM (SELECT processed_at, ${g} AS g FROM ${TABLE} WHERE consumer = $1) AS kept
             UNION ALL
             SELECT coalesce(max(g), 0) + 1, $4::bigint
               FROM (SELECT ${g} AS g FROM ${TABLE} WHERE consumer = $1
                      ORDER BY processed_at DESC LIMIT 1) AS newest) AS gaps,
            generate_series(gaps.lo, gaps.hi) AS g${KEYS[meta.family].from}
     ON CONFLICT DO NOTHING`,
    [CONSUMER_NAME, meta.base, meta.stepUs, meta.rows],
  );
  const count = await countHistory(db);
  if (count !== meta.rows)
    throw new Error(`bench: dedup history has ${count} rows after the restore, not ${meta.rows}`);
  await db.query(`VACUUM ${TABLE}`);
}

/** History rows older than `olderThanMs` at `now` when none had been deleted (the pruner's backlog). */
export async function historyOlderThan(
  db: Db,
  olderThanMs: number,
  now = Date.now(),
): Promise<number> {
  const meta = await readMeta(db);
  const cutoffUs = (now - olderThanMs - Date.parse(meta.base)) * 1000;
  // Row g is older when base + (g - 1) * step < cutoff.
  return Math.max(0, Math.min(meta.rows, Math.ceil(cutoffUs / meta.stepUs)));
}

/** Frees the space once the bench is done: 10 million rows are about 2 GB. */
export async function dropHistory(databaseUrl: string): Promise<void> {
  const pool = createPool(databaseUrl, 1);
  try {
    await pool.query(`DROP SCHEMA IF EXISTS ${HISTORY_SCHEMA} CASCADE`);
  } finally {
    await pool.end();
  }
}
