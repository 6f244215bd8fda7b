/**
 * `npm run bench -- --http-sql [--no-fsync] [--duration 5] [--rounds 3] [--clients 16]
 * [--claim-variants] [--out .cache/runs/bench]`
 *
 * The HTTP bench's four modes with Node taken out: the SQL each one sends, replayed by
 * pgbench (Postgres's own load generator, simple protocol, one round trip per line as
 * the server sends them) against one Postgres, interleaved for `--rounds`. Its ratios
 * are the ceiling of the HTTP bench's: what (c) ÷ (a) could reach if the server's own
 * CPU cost nothing.
 *   (a) BEGIN / the INSERT / COMMIT;
 *   (b) the seed handler's five statements;
 *   (c) the library's claim round trip, the INSERT, the stored response + verified
 *       COMMIT round trip, rendered by the library's own builders (KeyStatements,
 *       commitClaimSql);
 *   (d) the claim round trip on a stored key, then ROLLBACK.
 * `--claim-variants` adds (c) and (d) through each variant of the claim function in
 * claim-variants.ts, in the same rounds, and reports each against the shipped function.
 * Against a durable Postgres by default (bench/durability.ts), `--no-fsync` for the
 * CPU-bound run. Writes `<out>/latest-http-sql[-no-fsync].{json,md}`
 * (`latest-http-sql-variants[-no-fsync].*` with variants).
 */
import { runDir } from '../../kit/results.js';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { migrateKeyTable } from '../../src/http/store.js';
import { DEFAULT_TABLE } from '../../src/http/options.js';
import { intOption } from '../../kit/args.js';
import { CLAIM_VARIANTS, claimVariantDdl, tableVariantDdl } from './claim-variants.js';
import {
  baseScripts,
  keyTables,
  SCHEMA,
  scripts,
  STORED_KEYS,
  type SqlMode,
} from './sql-scripts.js';
import { ensureServices } from '../services.js';
import {
  durabilityLine,
  durabilitySuffix,
  ensureDurability,
  type Durability,
} from '../durability.js';
import { median, medianRoundRatio } from '../stats.js';
import { MODE_LABELS, type ModeId } from './report.js';
import { createBenchTables } from './tables.js';

const MODES: ModeId[] = ['a', 'b', 'c', 'd'];

interface SqlRun {
  mode: SqlMode;
  round: number;
  tps: number;
  transactions: number;
  chargesWritten: number;
  /** The machine's 1-minute load average at the end of the run. */
  load1: number;
}

function parse(argv: string[]): {
  durability: Durability;
  durationS: number;
  rounds: number;
  clients: number;
  out: string;
  claimVariants: boolean;
} {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    options: {
      'http-sql': { type: 'boolean' },
      'no-fsync': { type: 'boolean', default: false },
      duration: { type: 'string' },
      rounds: { type: 'string' },
      clients: { type: 'string' },
      out: { type: 'string', default: runDir('bench') },
      'claim-variants': { type: 'boolean', default: false },
    },
  });
  return {
    durability: values['no-fsync'] ? 'no-fsync' : 'durable',
    durationS: intOption('duration', values.duration, 5, 1, 600),
    rounds: intOption('rounds', values.rounds, 3, 1, 20),
    clients: intOption('clients', values.clients, 16, 1, 200),
    out: values.out,
    claimVariants: values['claim-variants'],
  };
}

async function resetTables(client: pg.Client, tables: string[]): Promise<void> {
  await client.query(`TRUNCATE ${SCHEMA}.charges, ${SCHEMA}.seed_keys`);
  for (const table of tables)
    await client.query(`DELETE FROM ${SCHEMA}.${table} WHERE idempotency_key NOT LIKE 'stored-%'`);
  await client.query(
    `VACUUM ${[`${SCHEMA}.charges`, `${SCHEMA}.seed_keys`, ...tables.map((t) => `${SCHEMA}.${t}`)].join(', ')}`,
  );
}

async function createTables(url: string, variants: boolean): Promise<void> {
  await createBenchTables(url, SCHEMA);
  const pool = new pg.Pool({ connectionString: url, max: 1 });
  try {
    await migrateKeyTable(pool, { schema: SCHEMA });
    if (variants)
      for (const variant of CLAIM_VARIANTS)
        if (variant.rewrite !== undefined)
          await pool.query(claimVariantDdl(SCHEMA, DEFAULT_TABLE, variant).sql);
        else if (variant.table !== undefined)
          for (const statement of tableVariantDdl(SCHEMA, DEFAULT_TABLE, variant))
            await pool.query(statement);
    // (d)'s keys, in each key table.
    const client = await pool.connect();
    try {
      for (const table of keyTables(variants)) await storeKeys(client, table);
    } finally {
      client.release();
    }
  } finally {
    await pool.end();
  }
}

/** (d)'s keys in `table`, stored as the library stores them: claim, effect, response + COMMIT. */
async function storeKeys(client: pg.PoolClient, table: string): Promise<void> {
  const c = baseScripts(table).c.split('\n');
  for (let k = 0; k < STORED_KEYS; k++) {
    const key = (s: string): string =>
      s.replaceAll('c-:client_id-:k', `stored-${k}`).replaceAll('\\;', ';');
    const results = (await client.query(key(c[1]!))) as unknown as pg.QueryResult[];
    const xid = (results.at(-1)?.rows[0] as { xid?: string | null } | undefined)?.xid;
    if (typeof xid !== 'string') throw new Error(`storing key ${k}: no xid from the claim`);
    await client.query(key(c[3]!));
    await client.query(key(c[4]!).replaceAll("':xid'", `'${xid}'`));
  }
}

function pgbench(
  bin: string,
  url: string,
  file: string,
  durationS: number,
  clients: number,
): { tps: number; transactions: number } {
  const result = spawnSync(
    bin,
    [
      '-n',
      '-M',
      'simple',
      '-c',
      String(clients),
      '-j',
      '2',
      '-T',
      String(durationS),
      '-f',
      file,
      url,
    ],
    { encoding: 'utf8' },
  );
  const out = `${result.stdout}\n${result.stderr}`;
  const tps = /tps = ([\d.]+)/.exec(out)?.[1];
  const transactions = /actually processed: (\d+)/.exec(out)?.[1];
  const failed = /number of failed transactions: (\d+)/.exec(out)?.[1];
  if (result.status !== 0 || tps === undefined || transactions === undefined)
    throw new Error(`pgbench failed (${result.status}):\n${out.slice(-2000)}`);
  if (failed !== undefined && failed !== '0')
    throw new Error(`pgbench: ${failed} failed transactions:\n${out.slice(-2000)}`);
  return { tps: Number(tps), transactions: Number(transactions) };
}

export async function runHttpSqlCeiling(argv: string[]): Promise<void> {
  const options = parse(argv);
  const services = await ensureServices(null);
  try {
    const durability = await ensureDurability(
      services.endpoints.databaseUrl,
      options.durability,
      services.started.includes('postgres'),
    );
    const { findBindir } = await import('../../kit/services/postgres.js');
    const bin = path.join(await findBindir(), 'pgbench');
    if (!fs.existsSync(bin))
      throw new Error(
        `no pgbench next to the Postgres binaries (${bin}): install Postgres's client tools`,
      );
    const url = services.endpoints.databaseUrl;
    await createTables(url, options.claimVariants);
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'eo-http-sql-'));
    const files = Object.entries(scripts(options.claimVariants)).map(([mode, text]) => {
      const file = path.join(dir, `${mode.replace(/[:@]/, '-')}.sql`);
      fs.writeFileSync(file, `${text}\n`);
      return { mode: mode as SqlMode, file };
    });
    const admin = new pg.Client({ connectionString: url });
    await admin.connect();
    const runs: SqlRun[] = [];
    try {
      for (let round = 1; round <= options.rounds; round++)
        for (const { mode, file } of files) {
          await resetTables(admin, keyTables(options.claimVariants));
          const { tps, transactions } = pgbench(bin, url, file, options.durationS, options.clients);
          const { rows } = await admin.query<{ n: string }>(
            `SELECT count(*) AS n FROM ${SCHEMA}.charges`,
          );
          const chargesWritten = Number(rows[0]?.n ?? 0);
          // The scripts must do the work they stand for: one charge per transaction, none on replay.
          if (chargesWritten !== (mode.startsWith('d') ? 0 : transactions))
            throw new Error(
              `(${mode}): ${chargesWritten} charges for ${transactions} transactions`,
            );
          const load1 = os.loadavg()[0] ?? NaN;
          runs.push({ mode, round, tps, transactions, chargesWritten, load1 });
          console.log(
            `[bench] round ${round} (${mode}): ${Math.round(tps)} transactions/s, load ${load1.toFixed(1)}`,
          );
        }
    } finally {
      await admin.end();
    }
    const tpsOf = (mode: SqlMode): number =>
      median(runs.filter((r) => r.mode === mode).map((r) => r.tps)) ?? NaN;
    const ratio = (num: SqlMode, den: SqlMode): number =>
      medianRoundRatio(runs, (r) => r.tps, num, den) ?? NaN;
    const command = `npm run bench -- ${argv.join(' ')}`;
    const loads = runs.map((r) => r.load1);
    const lines = [
      `# HTTP bench, SQL only: the ceiling of its ratios (${options.durability})`,
      '',
      `\`${command}\` — ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC; ${os.cpus().length}× ${os.cpus()[0]?.model.trim() ?? 'cpu'}; pgbench, simple protocol, ${options.clients} clients × ${options.durationS} s per run, ${options.rounds} interleaved rounds; tables emptied and vacuumed before each run. Load average ${os
        .loadavg()
        .map((l) => l.toFixed(1))
        .join(
          ' ',
        )} at the end, 1-min ${Math.min(...loads).toFixed(1)}–${Math.max(...loads).toFixed(1)} after each run.`,
      '',
      durabilityLine(durability),
      '',
      '| mode | transactions/s (median) | × (a) |',
      '| ---- | ----------------------: | ----: |',
      ...MODES.map(
        (m) =>
          `| ${MODE_LABELS[m]}, its SQL | ${Math.round(tpsOf(m)).toLocaleString('en-US')} | ${ratio(m, 'a').toFixed(2)} |`,
      ),
      '',
      '| ratio | SQL only (median of rounds) | the HTTP target (durable) |',
      '| --- | ---: | ---: |',
      `| (d) ÷ (a) | ${ratio('d', 'a').toFixed(2)} | ≥ 1.0 |`,
      `| (c) ÷ (b) | ${ratio('c', 'b').toFixed(2)} | ≥ 1.0 |`,
      `| (c) ÷ (a) | ${ratio('c', 'a').toFixed(2)} | ≥ 0.5 |`,
      '',
      'Checks: (a)-(c) wrote one charge per transaction, (d) none.',
      '',
      ...(options.claimVariants ? variantLines(ratio) : []),
    ];
    const markdown = lines.join('\n');
    fs.mkdirSync(options.out, { recursive: true });
    // A variants run is its own report: the four modes' file stays the plain run's.
    const base = path.join(
      options.out,
      `${options.claimVariants ? 'latest-http-sql-variants' : 'latest-http-sql'}${durabilitySuffix(options.durability)}`,
    );
    fs.writeFileSync(`${base}.md`, markdown);
    fs.writeFileSync(
      `${base}.json`,
      JSON.stringify(
        { command, options, durability, runs, scripts: scripts(options.claimVariants) },
        null,
        2,
      ) + '\n',
    );
    console.log(`\n${markdown}\nwritten to ${base}.{md,json}`);
  } finally {
    await services.stop();
  }
}

/** The claim variants against the shipped function, each ratio the median of its rounds. */
function variantLines(ratio: (num: SqlMode, den: SqlMode) => number): string[] {
  return [
    '## Claim function variants (`--claim-variants`, bench/http/claim-variants.ts)',
    '',
    'Each variant against the shipped function run right before it, in the same round (median of rounds).',
    '',
    '| variant | what changes | (c) ÷ shipped (c) | (d) ÷ shipped (d) | its (c) ÷ (a) | its (d) ÷ (a) |',
    '| --- | --- | ---: | ---: | ---: | ---: |',
    ...CLAIM_VARIANTS.map(
      (v) =>
        `| ${v.id} | ${v.summary} | ${ratio(`c:${v.id}`, `c@${v.id}`).toFixed(2)} | ${ratio(`d:${v.id}`, `d@${v.id}`).toFixed(2)} | ` +
        `${ratio(`c:${v.id}`, 'a').toFixed(2)} | ${ratio(`d:${v.id}`, 'a').toFixed(2)} |`,
    ),
    '',
  ];
}
