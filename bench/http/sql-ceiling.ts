/**
 * `npm run bench -- --http-sql [--duration 5] [--rounds 3] [--clients 16] [--out bench/results]`
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
 * Writes `<out>/latest-http-sql.{json,md}` (`latest-http-sql-variants.*` with variants).
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { KeyStatements, migrateKeyTable } from '../../src/http/store.js';
import { DEFAULT_TABLE } from '../../src/http/options.js';
import { commitClaimSql } from '../../src/store/commit.js';
import { integerOption } from '../args.js';
import { CLAIM_VARIANTS, claimVariantDdl } from './claim-variants.js';
import { ensureServices } from '../services.js';
import { median, medianRoundRatio } from '../stats.js';
import { MODE_LABELS, type ModeId } from './report.js';
import { createBenchTables } from './tables.js';

const SCHEMA = 'eo_bench_http_sql';
const STORED_KEYS = 1000;
const CHARGE = { customerId: 'cus_42', amountCents: 1999 };
const MODES: ModeId[] = ['a', 'b', 'c', 'd'];

/** A mode of the report: one of the four, or (c)/(d) through a claim variant (`c:read-first`). */
type SqlMode = ModeId | `${'c' | 'd'}:${string}`;

interface SqlRun {
  mode: SqlMode;
  round: number;
  tps: number;
  transactions: number;
  chargesWritten: number;
}

function parse(argv: string[]): {
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
      duration: { type: 'string', default: '5' },
      rounds: { type: 'string', default: '3' },
      clients: { type: 'string', default: '16' },
      out: { type: 'string', default: 'bench/results' },
      'claim-variants': { type: 'boolean', default: false },
    },
  });
  return {
    durationS: integerOption('duration', values.duration, 1, 600),
    rounds: integerOption('rounds', values.rounds, 1, 20),
    clients: integerOption('clients', values.clients, 1, 200),
    out: values.out,
    claimVariants: values['claim-variants'],
  };
}

/**
 * One pgbench command from a multi-statement round trip: pgbench ends a command at an
 * unquoted `;`, so the inner ones become `\;` (one compound query, one round trip).
 */
export function compound(sql: string): string {
  let out = '';
  let quoted = false;
  const trimmed = sql.trim().replace(/;$/, '');
  for (const ch of trimmed) {
    if (ch === "'") quoted = !quoted;
    out += ch === ';' && !quoted ? '\\;' : ch;
  }
  return `${out};`;
}

/** The four scripts, keyed per client and random draw (pgbench substitutes `:name`). */
function baseScripts(): Record<ModeId, string> {
  const table = `${SCHEMA}.charges`;
  const insert = (key: string): string =>
    `INSERT INTO ${table} (customer_id, amount_cents, idem_key) VALUES ('${CHARGE.customerId}', ${CHARGE.amountCents}, ${key}) RETURNING id;`;
  const unique = `\\set k random(1, 1000000000000)`;
  const keys = new KeyStatements({ schema: SCHEMA, table: DEFAULT_TABLE }, undefined);
  const body = JSON.stringify({ id: '1', ...CHARGE });
  const claimOf = (key: string) => ({
    scope: 'bench',
    key,
    method: 'POST',
    route: '/eo',
    fingerprint: createHash('sha256').update(body).digest(),
  });
  const PLACEHOLDER = 'eo-bench-key';
  const claimSql = (key: string): string =>
    compound(keys.claimSql(claimOf(PLACEHOLDER), 5000)).replaceAll(PLACEHOLDER, key);
  const stored = keys.storeResponse(claimOf(PLACEHOLDER), {
    status: 201,
    headers: { 'content-type': 'application/json; charset=utf-8' },
    body: Buffer.from(body),
    bodyOmitted: null,
  });
  // The xid the claim read (its epilogue's `xid` column), kept by \aset for the check.
  const commit = compound(commitClaimSql(':xid', stored)).replaceAll(
    PLACEHOLDER,
    'c-:client_id-:k',
  );
  const seed = `${SCHEMA}.seed_keys`;
  return {
    a: ['BEGIN;', insert('NULL'), 'COMMIT;'].join('\n'),
    b: [
      unique,
      'BEGIN;',
      `INSERT INTO ${seed} (key, request_hash) VALUES ('b-:client_id-:k', '${createHash('sha256').update(body).digest('hex')}') ON CONFLICT (key) DO NOTHING RETURNING key;`,
      insert(`'b-:client_id-:k'`),
      `UPDATE ${seed} SET status_code = 201, response = '${body}'::jsonb WHERE key = 'b-:client_id-:k';`,
      'COMMIT;',
    ].join('\n'),
    c: [unique, claimSql('c-:client_id-:k'), '\\aset', insert(`'c-:client_id-:k'`), commit].join(
      '\n',
    ),
    d: [`\\set k random(0, ${STORED_KEYS - 1})`, claimSql('stored-:k'), 'ROLLBACK;'].join('\n'),
  };
}

/** The four scripts, and (c) and (d) through each claim variant when `variants`. */
function scripts(variants: boolean): Partial<Record<SqlMode, string>> {
  const base = baseScripts();
  if (!variants) return base;
  const all: Partial<Record<SqlMode, string>> = { ...base };
  for (const variant of CLAIM_VARIANTS) {
    const { from, to } = claimVariantDdl(SCHEMA, DEFAULT_TABLE, variant);
    for (const mode of ['c', 'd'] as const) {
      const script = base[mode].replace(`${from}"(`, `${to}"(`);
      if (script === base[mode]) throw new Error(`(${mode}): no claim function call to swap`);
      all[`${mode}:${variant.id}`] = script;
    }
  }
  return all;
}

async function resetTables(client: pg.Client): Promise<void> {
  await client.query(`TRUNCATE ${SCHEMA}.charges, ${SCHEMA}.seed_keys`);
  await client.query(
    `DELETE FROM ${SCHEMA}.${DEFAULT_TABLE} WHERE idempotency_key NOT LIKE 'stored-%'`,
  );
  await client.query(`VACUUM ${SCHEMA}.charges, ${SCHEMA}.seed_keys, ${SCHEMA}.${DEFAULT_TABLE}`);
}

async function createTables(url: string, variants: boolean): Promise<void> {
  await createBenchTables(url, SCHEMA);
  const pool = new pg.Pool({ connectionString: url, max: 1 });
  try {
    await migrateKeyTable(pool, { schema: SCHEMA });
    if (variants)
      for (const variant of CLAIM_VARIANTS)
        await pool.query(claimVariantDdl(SCHEMA, DEFAULT_TABLE, variant).sql);
    // (d)'s keys, stored as the library stores them (claim, response, COMMIT).
    const client = await pool.connect();
    try {
      const c = baseScripts().c.split('\n');
      for (let k = 0; k < STORED_KEYS; k++) {
        const key = (s: string): string =>
          s.replaceAll('c-:client_id-:k', `stored-${k}`).replaceAll('\\;', ';');
        const results = (await client.query(key(c[1]!))) as unknown as pg.QueryResult[];
        const xid = (results.at(-1)?.rows[0] as { xid?: string | null } | undefined)?.xid;
        if (typeof xid !== 'string') throw new Error(`storing key ${k}: no xid from the claim`);
        await client.query(key(c[3]!));
        await client.query(key(c[4]!).replaceAll("':xid'", `'${xid}'`));
      }
    } finally {
      client.release();
    }
  } finally {
    await pool.end();
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
    const { findBindir } = await import('../../test/helpers/services/postgres.js');
    const bin = path.join(await findBindir(), 'pgbench');
    if (!fs.existsSync(bin))
      throw new Error(
        `no pgbench next to the Postgres binaries (${bin}): install Postgres's client tools`,
      );
    const url = services.endpoints.databaseUrl;
    await createTables(url, options.claimVariants);
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'eo-http-sql-'));
    const files = Object.entries(scripts(options.claimVariants)).map(([mode, text]) => {
      const file = path.join(dir, `${mode.replace(':', '-')}.sql`);
      fs.writeFileSync(file, `${text}\n`);
      return { mode: mode as SqlMode, file };
    });
    const admin = new pg.Client({ connectionString: url });
    await admin.connect();
    const runs: SqlRun[] = [];
    try {
      for (let round = 1; round <= options.rounds; round++)
        for (const { mode, file } of files) {
          await resetTables(admin);
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
          runs.push({ mode, round, tps, transactions, chargesWritten });
          console.log(`[bench] round ${round} (${mode}): ${Math.round(tps)} transactions/s`);
        }
    } finally {
      await admin.end();
    }
    const tpsOf = (mode: SqlMode): number =>
      median(runs.filter((r) => r.mode === mode).map((r) => r.tps)) ?? NaN;
    const ratio = (num: SqlMode, den: SqlMode): number =>
      medianRoundRatio(runs, (r) => r.tps, num, den) ?? NaN;
    const command = `npm run bench -- ${argv.join(' ')}`;
    const lines = [
      '# HTTP bench, SQL only: the ceiling of its ratios',
      '',
      `\`${command}\` — ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC; ${os.cpus().length}× ${os.cpus()[0]?.model.trim() ?? 'cpu'}; pgbench, simple protocol, ${options.clients} clients × ${options.durationS} s per run, ${options.rounds} interleaved rounds; tables emptied and vacuumed before each run. Load average ${os
        .loadavg()
        .map((l) => l.toFixed(1))
        .join(' ')} at the end.`,
      '',
      '| mode | transactions/s (median) | × (a) |',
      '| ---- | ----------------------: | ----: |',
      ...MODES.map(
        (m) =>
          `| ${MODE_LABELS[m]}, its SQL | ${Math.round(tpsOf(m)).toLocaleString('en-US')} | ${ratio(m, 'a').toFixed(2)} |`,
      ),
      '',
      '| ratio | SQL only (median of rounds) | the HTTP target |',
      '| --- | ---: | ---: |',
      `| (c) ÷ (a) | ${ratio('c', 'a').toFixed(2)} | ≥ 0.7 |`,
      `| (c) ÷ (b) | ${ratio('c', 'b').toFixed(2)} | ≥ 1.0 |`,
      `| (d) ÷ (a) | ${ratio('d', 'a').toFixed(2)} | ≥ 1.0 |`,
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
      options.claimVariants ? 'latest-http-sql-variants' : 'latest-http-sql',
    );
    fs.writeFileSync(`${base}.md`, markdown);
    fs.writeFileSync(
      `${base}.json`,
      JSON.stringify({ command, options, runs, scripts: scripts(options.claimVariants) }, null, 2) +
        '\n',
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
    '| variant | what changes | (c) ÷ shipped (c) | (d) ÷ shipped (d) | its (c) ÷ (a) | its (d) ÷ (a) |',
    '| --- | --- | ---: | ---: | ---: | ---: |',
    ...CLAIM_VARIANTS.map(
      (v) =>
        `| ${v.id} | ${v.summary} | ${ratio(`c:${v.id}`, 'c').toFixed(2)} | ${ratio(`d:${v.id}`, 'd').toFixed(2)} | ` +
        `${ratio(`c:${v.id}`, 'a').toFixed(2)} | ${ratio(`d:${v.id}`, 'a').toFixed(2)} |`,
    ),
    '',
  ];
}
