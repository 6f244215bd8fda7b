/**
 * Issue 15's CLI, end to end: the bin as `npm run build` makes it, run as a child
 * process against the test Postgres, for every command: output, exit codes, bad input,
 * and what it did to the tables.
 */
import { createHash } from 'node:crypto';
import { beforeAll, describe, expect, it } from '@jest/globals';
import { createConsumer, migrate } from '../../../src/index.js';
import { migrationLockKeys } from '../../../src/store/migrator.js';
import { memorySource } from '../../../src/testing/index.js';
import type { TestDatabase } from '../../helpers/db.js';
import { waitFor } from '../../helpers/wait-for.js';
import { cliFixture, jsonOf, runOnSchema, runCli, startCli } from './built-cli.js';

const fixture = cliFixture('cli');
let db: TestDatabase;
let main: string;
beforeAll(() => {
  ({ db, main } = fixture());
});

/** Runs the bin on the test schema; `table` picks the dedup table. */
const eo = runOnSchema(fixture, '--table');

const json = jsonOf;

async function seed(table: string, rows: Array<[consumer: string, key: string, age: string]>) {
  await migrate(db.pool, { schema: db.schema, table });
  for (const [consumer, key, age] of rows) {
    await db.pool.query(
      `INSERT INTO ${db.table(table)} (consumer, message_key, payload_hash, processed_at)
       VALUES ($1, $2::text, sha256(convert_to($2::text, 'UTF8')), now() - $3::interval)`,
      [consumer, key, age],
    );
  }
}

const count = async (table: string, consumer?: string): Promise<number> => {
  const { rows } = await db.pool.query<{ n: string }>(
    `SELECT count(*) AS n FROM ${db.table(table)} WHERE $1::text IS NULL OR consumer = $1`,
    [consumer ?? null],
  );
  return Number(rows[0]?.n);
};

describe('migrate', () => {
  /** Columns and indexes of every table in a schema, with the schema's name taken out. */
  async function shape(schema: string) {
    const columns = await db.pool.query(
      `SELECT table_name, column_name, data_type, is_nullable, column_default
         FROM information_schema.columns WHERE table_schema = $1 ORDER BY table_name, ordinal_position`,
      [schema],
    );
    const indexes = await db.pool.query<{ indexdef: string }>(
      'SELECT indexdef FROM pg_indexes WHERE schemaname = $1 ORDER BY indexname',
      [schema],
    );
    return {
      columns: columns.rows,
      indexes: indexes.rows.map((r) => r.indexdef.replaceAll(schema, '<schema>')),
    };
  }

  it('--print --all needs no database; applied, it leaves what migrate makes, and migrate finds nothing pending', async () => {
    const printedSchema = `${db.schema}_printed`;
    const appliedSchema = `${db.schema}_applied`;
    const { DATABASE_URL: _, ...noDatabase } = process.env;
    const printed = await runCli(
      main,
      ['migrate', '--print', '--all', '--schema', printedSchema],
      noDatabase,
    );
    expect(printed).toMatchObject({ code: 0, stderr: '' });
    expect(printed.stdout).toContain(
      `CREATE TABLE IF NOT EXISTS "${printedSchema}"."processed_messages" (`,
    );
    expect(printed.stdout).toContain(
      `CREATE TABLE IF NOT EXISTS "${printedSchema}"."eo_kafka_offsets" (`,
    );
    await db.pool.query(printed.stdout); // what a deploy pipeline's migration tool runs

    const applied = await runCli(main, ['migrate', '--schema', appliedSchema]);
    expect(applied).toMatchObject({ code: 0, stderr: '' });
    expect(applied.stdout.trimEnd().split('\n')).toEqual([
      expect.stringMatching(/^family +table +result$/),
      expect.stringMatching(
        new RegExp(`^consumer +"${appliedSchema}"\\."processed_messages" +applied 1$`),
      ),
      expect.stringMatching(
        new RegExp(`^kafka-offsets +"${appliedSchema}"\\."eo_kafka_offsets" +applied 1$`),
      ),
      expect.stringMatching(
        new RegExp(`^http-keys +"${appliedSchema}"\\."eo_idempotency_keys" +applied 1$`),
      ),
      expect.stringMatching(new RegExp(`^outbox +"${appliedSchema}"\\."eo_outbox" +applied 1$`)),
      expect.stringMatching(new RegExp(`^flows +"${appliedSchema}"\\."eo_flows" +applied 1, 2$`)),
    ]);
    const expected = await shape(appliedSchema);
    // The ledger (6 columns) beside the five tables.
    expect(expected.columns).toHaveLength(63);
    expect(expected.indexes).toHaveLength(16);
    expect(await shape(printedSchema)).toEqual(expected);
    // Checksums differ (the SQL names its schema); migrate below checks them.
    const ledgerOf = async (schema: string): Promise<unknown[]> =>
      (
        await db.pool.query<Record<string, unknown>>(
          `SELECT family, table_name, version, summary FROM "${schema}".effectively_once_migrations ORDER BY family`,
        )
      ).rows;
    expect(await ledgerOf(printedSchema)).toEqual(await ledgerOf(appliedSchema));

    // Printed SQL, applied: the library's own migrate finds nothing pending, and --print
    // against that database prints nothing to run.
    const again = json(await runCli(main, ['migrate', '--schema', printedSchema, '--json']));
    const upToDate = (family: string, table: string, version = 1) => ({
      family,
      schema: printedSchema,
      table,
      applied: [],
      version,
      unknown: [],
    });
    expect(again).toEqual({
      families: [
        upToDate('consumer', 'processed_messages'),
        upToDate('kafka-offsets', 'eo_kafka_offsets'),
        upToDate('http-keys', 'eo_idempotency_keys'),
        upToDate('outbox', 'eo_outbox'),
        upToDate('flows', 'eo_flows', 2),
      ],
    });
    const nothing = await runCli(main, ['migrate', '--print', '--schema', printedSchema]);
    expect(nothing).toMatchObject({ code: 0, stderr: '' });
    expect(nothing.stdout).toBe(
      "-- Nothing pending: every table has all of this version's migration steps.\n",
    );
    for (const schema of [printedSchema, appliedSchema])
      await db.pool.query(`DROP SCHEMA "${schema}" CASCADE`);
  });

  it('--print reads the ledger: only the pending steps, applied nowhere', async () => {
    const schema = `${db.schema}_pending`;
    await migrate(db.pool, { schema });
    const run = await runCli(main, ['migrate', '--print', '--schema', schema, '--json']);
    expect(run).toMatchObject({ code: 0, stderr: '' });
    const doc = JSON.parse(run.stdout) as {
      ledgers: Array<{ schema: string }>;
      families: Array<{ family: string; version: number; pending: Array<{ version: number }> }>;
    };
    expect(doc.ledgers.map((l) => l.schema)).toEqual([schema]);
    expect(doc.families.map((f) => [f.family, f.version, f.pending.map((p) => p.version)])).toEqual(
      [
        ['consumer', 1, []],
        ['kafka-offsets', 0, [1]],
        ['http-keys', 0, [1]],
        ['outbox', 0, [1]],
        ['flows', 0, [1, 2]],
      ],
    );
    // Printing applied nothing.
    const { rows } = await db.pool.query<{ tablename: string }>(
      'SELECT tablename FROM pg_tables WHERE schemaname = $1 ORDER BY 1',
      [schema],
    );
    expect(rows.map((r) => r.tablename)).toEqual([
      'effectively_once_migrations',
      'processed_messages',
    ]);
    await db.pool.query(`DROP SCHEMA "${schema}" CASCADE`);
  });

  it('a step recorded with another checksum exits 1 and runs nothing', async () => {
    const schema = `${db.schema}_edited`;
    await migrate(db.pool, { schema });
    await db.pool.query(`UPDATE "${schema}".effectively_once_migrations SET checksum = 'edited'`);
    for (const extra of [[], ['--print']]) {
      const run = await runCli(main, [
        'migrate',
        '--only',
        'consumer',
        '--schema',
        schema,
        ...extra,
      ]);
      expect(run).toMatchObject({ code: 1, stdout: '' });
      expect(run.stderr).toMatch(
        /^effectively-once migrate: EO_MIGRATION_CHECKSUM: Migration step 1 of the consumer table ".*"\."processed_messages" was applied from other statements/,
      );
    }
    await db.pool.query(`DROP SCHEMA "${schema}" CASCADE`);
  });

  it('--only and the table flags pick what is created', async () => {
    const run = json(
      await eo([
        'migrate',
        '--only',
        'kafka-offsets',
        '--kafka-offsets-table',
        'offsets_x',
        '--json',
      ]),
    );
    expect(run).toEqual({
      families: [
        {
          family: 'kafka-offsets',
          schema: db.schema,
          table: 'offsets_x',
          applied: [1],
          version: 1,
          unknown: [],
        },
      ],
    });
    const { rows } = await db.pool.query<{ tablename: string }>(
      'SELECT tablename FROM pg_tables WHERE schemaname = $1 ORDER BY 1',
      [db.schema],
    );
    expect(rows.map((r) => r.tablename)).toEqual(['effectively_once_migrations', 'offsets_x']);
    await db.pool.query(`DROP TABLE ${db.table('offsets_x')}`);
    await db.pool.query(`DROP TABLE ${db.table('effectively_once_migrations')}`);
  });

  it('SIGINT while waiting for the migration lock exits 130 at once; nothing is created', async () => {
    // Another process holds the table's migration lock, so migrate waits on it.
    const holder = await db.pool.connect();
    try {
      await holder.query('BEGIN');
      await holder.query(
        'SELECT pg_advisory_xact_lock($1, $2)',
        migrationLockKeys('kafka-offsets', { schema: db.schema, table: 'offsets_locked' }),
      );
      const { child, done } = startCli(main, [
        'migrate',
        '--only',
        'kafka-offsets',
        '--kafka-offsets-table',
        'offsets_locked',
        '--schema',
        db.schema,
      ]);
      await waitFor(
        async () => {
          const { rows } = await db.pool.query(
            `SELECT 1 FROM pg_stat_activity
              WHERE application_name = 'effectively-once-cli' AND wait_event = 'advisory'
                AND strpos(query, 'pg_advisory_xact_lock') > 0`,
          );
          return rows.length > 0;
        },
        { what: 'migrate waiting for the lock' },
      );
      child.kill('SIGINT');
      const run = await done;
      expect(run).toMatchObject({ code: 130, signal: null, stdout: '' });
      expect(run.stderr).toBe('effectively-once migrate: interrupted\n');
    } finally {
      await holder.query('ROLLBACK');
      holder.release();
    }
    // The CLI's connection went with its process: its transaction never committed.
    await waitFor(async () => {
      const { rows } = await db.pool.query(
        "SELECT 1 FROM pg_stat_activity WHERE application_name = 'effectively-once-cli' AND wait_event = 'advisory'",
      );
      return rows.length === 0;
    });
    const { rows } = await db.pool.query('SELECT to_regclass($1) AS t', [
      db.table('offsets_locked'),
    ]);
    expect(rows).toEqual([{ t: null }]);
    // The schema's ledger came before the table's lock, and records nothing.
    const ledger = await db.pool.query(`SELECT * FROM ${db.table('effectively_once_migrations')}`);
    expect(ledger.rows).toEqual([]);
    await db.pool.query(`DROP TABLE ${db.table('effectively_once_migrations')}`);
  });

  it('bad input exits 2 and creates nothing; an unreachable database exits 1', async () => {
    const bad = await eo(['migrate', '--only', 'consumer,inbox']);
    expect(bad).toMatchObject({ code: 2, stdout: '' });
    expect(bad.stderr).toContain('"inbox" is not one of consumer, kafka-offsets');
    const { rows } = await db.pool.query('SELECT 1 FROM pg_tables WHERE schemaname = $1', [
      db.schema,
    ]);
    expect(rows).toEqual([]);

    const down = await runCli(main, ['migrate', '--database-url', 'postgres://127.0.0.1:1/none']);
    expect(down).toMatchObject({ code: 1, stdout: '' });
    expect(down.stderr).toMatch(
      /^effectively-once migrate: EO_DATABASE: Database connect \(migrate\) failed: .*ECONNREFUSED/,
    );
    expect(down.stderr.trim().split('\n')).toHaveLength(1);
  });
});

describe('prune', () => {
  const table = 'prune_t';
  beforeAll(async () => {
    await seed(table, [
      ...Array.from({ length: 5 }, (_, i): [string, string, string] => [
        'a',
        `old-${i}`,
        '10 days',
      ]),
      ...Array.from({ length: 3 }, (_, i): [string, string, string] => ['a', `new-${i}`, '1 day']),
      ...Array.from({ length: 4 }, (_, i): [string, string, string] => [
        'b',
        `old-${i}`,
        '10 days',
      ]),
    ]);
  });

  it('--dry-run counts what would go, on the database clock, and deletes nothing', async () => {
    const text = await eo(['prune', '--older-than', '7d', '--dry-run'], table);
    expect(text).toMatchObject({ code: 0, stderr: '' });
    expect(text.stdout).toMatch(
      /^Dry run: would delete 9 rows of every consumer in ".+"\."prune_t" processed before \S+ \(older than 7d by the database's clock\) whose own expiry passed \(or that have none\)\. Nothing was deleted\.\n$/,
    );
    const doc = json(
      await eo(['prune', '--older-than', '7d', '--consumer', 'a', '--dry-run', '--json'], table),
    );
    expect(doc).toMatchObject({
      consumer: 'a',
      olderThan: '7d',
      olderThanMs: 7 * 86_400_000,
      dryRun: true,
      wouldDelete: 5,
    });
    const cutoff = Date.parse(doc.cutoff as string);
    expect(Math.abs(cutoff - (Date.now() - 7 * 86_400_000))).toBeLessThan(60_000);
    expect(await count(table)).toBe(12);
  });

  it("deletes one consumer's old rows, then every consumer's, in batches", async () => {
    const a = json(await eo(['prune', '--older-than', '7d', '--consumer', 'a', '--json'], table));
    expect(a).toMatchObject({ consumer: 'a', dryRun: false, deleted: 5, interrupted: false });
    expect([await count(table, 'a'), await count(table, 'b')]).toEqual([3, 4]);

    const all = await eo(
      ['prune', '--older-than', '7d', '--batch-size', '3', '--duty-cycle', '0.5'],
      table,
    );
    expect(all).toMatchObject({ code: 0, stderr: '' });
    expect(all.stdout).toMatch(
      /^Deleted 4 rows of every consumer in .+ processed before \S+ \(older than 7d/,
    );
    expect([await count(table, 'a'), await count(table, 'b')]).toEqual([3, 0]);
  });

  it.each([
    [['--older-than', '7'], '"7" is not a duration'],
    [['--older-than', '0d'], '"0d" must be longer than zero'],
    [['--older-than', '1d', '--batch-size', '1e3'], '"1e3" is not a whole number'],
    [['--older-than', '1d', '--duty-cycle', '0'], 'must be a number above 0 and at most 1'],
    [['--older-then', '1d'], '"--older-then": is not an option of prune'],
    [[], '"--older-than": is required'],
  ])('%j exits 2 with one line saying why, deleting nothing', async (args, problem) => {
    const run = await eo(['prune', ...args], table);
    expect(run).toMatchObject({ code: 2, stdout: '' });
    expect(run.stderr).toMatch(/^effectively-once prune: EO_CONFIGURATION: Invalid option "/);
    expect(run.stderr).toContain(problem);
    expect(run.stderr.trim().split('\n')).toHaveLength(1);
    expect(await count(table)).toBe(3);
  });

  it('a missing table exits 1 and says how to create it', async () => {
    const run = await eo(['prune', '--older-than', '7d'], 'no_such_table');
    expect(run).toMatchObject({ code: 1, stdout: '' });
    expect(run.stderr).toContain('EO_DATABASE');
    expect(run.stderr).toContain(`relation "${db.schema}.no_such_table" does not exist`);
    expect(run.stderr).toContain('effectively-once migrate');
  });

  it('SIGINT stops after the current batch, reports what it deleted and exits 130', async () => {
    const slow = 'prune_slow';
    await migrate(db.pool, { schema: db.schema, table: slow });
    await db.pool.query(
      `INSERT INTO ${db.table(slow)} (consumer, message_key, processed_at)
       SELECT 's', 'k' || g, now() - interval '30 days' FROM generate_series(1, 300) g`,
    );
    // One row per batch, then 19 times as long asleep: minutes for 300 rows.
    const { child, done } = startCli(main, [
      'prune',
      '--older-than',
      '7d',
      '--batch-size',
      '1',
      '--duty-cycle',
      '0.05',
      '--json',
      '--schema',
      db.schema,
      '--table',
      slow,
    ]);
    await waitFor(async () => (await count(slow)) <= 297, {
      timeoutMs: 60_000,
      what: 'a few batches',
    });
    child.kill('SIGINT');
    const run = await done;
    expect(run).toMatchObject({ code: 130, signal: null });
    const doc = json(run);
    const left = await count(slow);
    expect(doc).toMatchObject({ interrupted: true, deleted: 300 - left });
    expect(left).toBeGreaterThan(0);
  });
});

describe('stats', () => {
  const table = 'stats_t';
  beforeAll(async () => {
    await seed(table, [
      ['a', 'a1', '20 days'],
      ['a', 'a2', '10 days'],
      ['a', 'a3', '9 days'],
      ['a', 'a4', '8 days'],
      ['a', 'a5', '2 hours'],
      ['a', 'a6', '1 hour'],
      ['b', 'b1', '12 days'],
      ['b', 'b2', '3 days'],
      ['b', 'b3', '30 minutes'],
    ]);
  });

  it('per consumer: exact rows, oldest and newest, and what a window would prune; sizes', async () => {
    const doc = json(await eo(['stats', '--window', '7d', '--json'], table));
    const ages = await db.pool.query<{ consumer: string; oldest: Date; newest: Date }>(
      `SELECT consumer, min(processed_at) AS oldest, max(processed_at) AS newest FROM ${db.table(table)} GROUP BY consumer ORDER BY consumer`,
    );
    const [a, b] = ages.rows;
    expect(doc).toMatchObject({
      schema: db.schema,
      table,
      estimate: false,
      window: { olderThan: '7d', olderThanMs: 7 * 86_400_000 },
      oldest: a?.oldest.toISOString(),
      newest: b?.newest.toISOString(),
      total: { rows: 9, olderThanWindow: 5 },
      consumers: [
        {
          consumer: 'a',
          rows: 6,
          oldest: a?.oldest.toISOString(),
          newest: a?.newest.toISOString(),
          olderThanWindow: 4,
        },
        {
          consumer: 'b',
          rows: 3,
          oldest: b?.oldest.toISOString(),
          newest: b?.newest.toISOString(),
          olderThanWindow: 1,
        },
      ],
    });
    const sizes = doc.sizes as {
      totalBytes: number;
      tableBytes: number;
      indexesBytes: number;
      indexes: Array<{ name: string; bytes: number }>;
    };
    expect(sizes.indexes.map((i) => i.name)).toEqual([
      'stats_t_expires_at_idx',
      'stats_t_pkey',
      'stats_t_processed_at_idx',
    ]);
    expect(sizes.tableBytes).toBeGreaterThan(0);
    expect(sizes.indexesBytes).toBe(sizes.indexes.reduce((s, i) => s + i.bytes, 0));
    expect(sizes.totalBytes).toBe(sizes.tableBytes + sizes.indexesBytes);
  });

  it('prints a table per consumer by default; --consumer narrows it', async () => {
    const text = await eo(['stats', '--window', '7d'], table);
    expect(text).toMatchObject({ code: 0, stderr: '' });
    const lines = text.stdout.trimEnd().split('\n');
    expect(lines[0]).toBe(`Table "${db.schema}"."stats_t"`);
    expect(lines).toContainEqual(
      expect.stringMatching(
        /^size: +\d+ (bytes|kB) \(table \d+ (bytes|kB), indexes \d+ (bytes|kB)\)$/,
      ),
    );
    expect(lines).toContainEqual(expect.stringMatching(/^rows: +9$/));
    expect(lines).toContainEqual(expect.stringMatching(/^older than 7d: +5 \(processed before /));
    expect(lines.slice(-3)).toEqual([
      expect.stringMatching(/^consumer +rows +oldest +newest +older than 7d$/),
      expect.stringMatching(/^a +6 +\S+Z +\S+Z +4$/),
      expect.stringMatching(/^b +3 +\S+Z +\S+Z +1$/),
    ]);

    const one = json(await eo(['stats', '--consumer', 'b', '--json'], table));
    expect(one).toMatchObject({
      consumer: 'b',
      window: null,
      total: { rows: 3, olderThanWindow: null },
    });
    expect((one.consumers as unknown[]).length).toBe(1);
  });

  it('--estimate: consumers from the primary key, rows from the planner, no per-consumer ages', async () => {
    await db.pool.query(`ANALYZE ${db.table(table)}`);
    const doc = json(await eo(['stats', '--estimate', '--window', '7d', '--json'], table));
    expect(doc).toMatchObject({ estimate: true, analyzedAt: expect.any(String) });
    const consumers = doc.consumers as Array<{
      consumer: string;
      rows: number;
      oldest: null;
      newest: null;
    }>;
    expect(consumers.map((c) => [c.consumer, c.oldest, c.newest])).toEqual([
      ['a', null, null],
      ['b', null, null],
    ]);
    // ANALYZE saw every row of so small a table: the planner's figures are the counts.
    expect(consumers.map((c) => c.rows)).toEqual([6, 3]);
    expect((doc.total as { rows: number }).rows).toBe(9);
    const text = await eo(['stats', '--estimate'], table);
    expect(text.stdout).toMatch(/^rows: +~9$/m);
    expect(text.stdout).toMatch(/^a +~6 +- +-$/m);
  });

  it('an empty table: zero rows, no consumers, exact or estimated', async () => {
    await migrate(db.pool, { schema: db.schema, table: 'stats_empty' });
    for (const extra of [[], ['--estimate']]) {
      const doc = json(await eo(['stats', '--window', '1d', '--json', ...extra], 'stats_empty'));
      expect(doc).toMatchObject({
        oldest: null,
        newest: null,
        total: { rows: 0, olderThanWindow: 0 },
        consumers: [],
      });
    }
    const text = await eo(['stats'], 'stats_empty');
    expect(text.stdout).toMatch(/\n\nNo rows\.\n$/);
  });

  it('bad input exits 2; a missing table exits 1', async () => {
    const bad = await eo(['stats', '--window', '1 week'], table);
    expect(bad).toMatchObject({ code: 2, stdout: '' });
    expect(bad.stderr).toContain('"1 week" is not a duration');
    const missing = await eo(['stats', '--json'], 'nope');
    expect(missing).toMatchObject({ code: 1, stdout: '' });
    expect(JSON.parse(missing.stderr)).toMatchObject({
      error: {
        code: 'EO_DATABASE',
        sqlstate: '42P01',
        message: expect.stringContaining('effectively-once migrate'),
      },
    });
  });
});

describe('inspect', () => {
  const table = 'inspect_t';
  const sha256 = (text: string): string => createHash('sha256').update(text).digest('hex');

  it("a key claimed by a consumer, one held by a running handler's transaction, one never seen", async () => {
    const source = memorySource<{ n: number }>();
    let release = (): void => {};
    const held = new Promise<void>((resolve) => (release = resolve));
    const consumer = createConsumer<{ n: number }>({
      name: 'orders',
      source,
      pool: db.pool,
      schema: db.schema,
      table,
      handler: async (message) => {
        if (message.n === 2) await held;
      },
    });
    await consumer.start();
    try {
      source.send({ n: 1 }, { key: 'order-1' });
      await waitFor(() => consumer.stats().processed === 1, { what: 'order-1 processed' });
      source.send({ n: 2 }, { key: 'order-2' }); // its handler waits: the claim stays uncommitted
      await waitFor(
        async () => {
          const { rows } = await db.pool.query(
            `SELECT 1 FROM pg_stat_activity
            WHERE state = 'idle in transaction' AND query LIKE '%ON CONFLICT%' AND strpos(query, $1) > 0`,
            [db.schema],
          );
          return rows.length > 0;
        },
        { what: "order-2's claim in flight" },
      );

      // Claimed and committed: when, and the sha256 of the payload the runner hashed.
      const claimed = await eo(['inspect', 'order-1', '--consumer', 'orders', '--json'], table);
      expect(claimed.code).toBe(0);
      const doc = json(claimed);
      expect(doc).toMatchObject({
        key: 'order-1',
        consumer: 'orders',
        claimed: true,
        claims: [
          {
            consumer: 'orders',
            processedAt: expect.any(String),
            payloadHash: sha256(JSON.stringify({ n: 1 })),
          },
        ],
        inFlight: null,
      });
      const text = await eo(['inspect', 'order-1', '--consumer', 'orders'], table);
      expect(text).toMatchObject({ code: 0, stderr: '' });
      expect(text.stdout).toMatch(
        new RegExp(`^orders +\\S+Z +${sha256(JSON.stringify({ n: 1 }))}$`, 'm'),
      );

      // In flight: invisible to a read; read-only inspect says it cannot tell...
      const unknown = await eo(['inspect', 'order-2', '--consumer', 'orders'], table);
      expect(unknown.code).toBe(3);
      expect(unknown.stdout).toContain('no committed claim by consumer "orders"');
      expect(unknown.stdout).toMatch(
        /^In flight: unknown: 1 other transaction\(s\) hold a write lock on the table/m,
      );
      // ...the probe can: its claim has to wait for the handler's transaction.
      const probed = json(
        await eo(['inspect', 'order-2', '--consumer', 'orders', '--probe', '--json'], table),
      );
      expect(probed).toMatchObject({ claimed: false, inFlight: { state: 'yes', how: 'probe' } });
      const free = json(
        await eo(['inspect', 'order-3', '--consumer', 'orders', '--probe', '--json'], table),
      );
      expect(free).toMatchObject({ claimed: false, inFlight: { state: 'no', how: 'probe' } });
      expect(await count(table)).toBe(1); // the probes rolled back

      release();
      await waitFor(() => consumer.stats().processed === 2, { what: 'order-2 processed' });
      const after = json(await eo(['inspect', 'order-2', '--consumer', 'orders', '--json'], table));
      expect(after).toMatchObject({
        claimed: true,
        claims: [{ payloadHash: sha256(JSON.stringify({ n: 2 })) }],
      });
    } finally {
      release();
      await consumer.stop();
    }
    // Nothing is writing now: read-only inspect can say no claim is in flight.
    const idle = await eo(['inspect', 'order-3', '--consumer', 'orders'], table);
    expect(idle).toMatchObject({ code: 3, stderr: '' });
    expect(idle.stdout).toContain(
      'In flight: no: no other transaction holds a write lock on the table',
    );
  });

  it("without --consumer: every consumer's claim of the key, found through the primary key", async () => {
    await db.pool.query(
      `INSERT INTO ${db.table(table)} (consumer, message_key, payload_hash) VALUES ('billing', 'order-1', NULL), ('zz', '-dash', NULL)`,
    );
    const doc = json(await eo(['inspect', 'order-1', '--json'], table));
    expect(
      (doc.claims as Array<{ consumer: string; payloadHash: string | null }>).map((c) => [
        c.consumer,
        c.payloadHash,
      ]),
    ).toEqual([
      ['billing', null],
      ['orders', sha256(JSON.stringify({ n: 1 }))],
    ]);
    const text = await eo(['inspect', 'order-1'], table);
    expect(text.stdout).toMatch(/^billing +\S+Z +\(none stored\)$/m);
    // A key that looks like an option goes after "--".
    const dash = await runCli(main, [
      'inspect',
      '--schema',
      db.schema,
      '--table',
      table,
      '--json',
      '--',
      '-dash',
    ]);
    expect(json(dash)).toMatchObject({ key: '-dash', claims: [{ consumer: 'zz' }] });
  });

  it('bad input exits 2: a key no claim could store, --probe without --consumer', async () => {
    const long = await eo(['inspect', 'k'.repeat(2000), '--consumer', 'orders'], table);
    expect(long).toMatchObject({ code: 2, stdout: '' });
    expect(long.stderr).toContain('EO_INVALID_KEY');
    const probe = await eo(['inspect', 'order-1', '--probe'], table);
    expect(probe).toMatchObject({ code: 2, stdout: '' });
    expect(probe.stderr).toContain('"--probe": needs --consumer');
  });
});
