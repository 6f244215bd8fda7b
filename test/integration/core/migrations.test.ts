/**
 * The versioned migrations against Postgres: a fresh schema, a re-run (a no-op that
 * takes no lock), migrators racing (one table, one schema's ledger), a table made
 * before its ledger rows (adopted), a checksum that differs (refused), a ledger ahead
 * of this version (accepted), and the doors started with `migrate: false`.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  createConsumer,
  MigrationChecksumError,
  MigrationsPendingError,
} from '../../../src/index.js';
import { createIdempotency } from '../../../src/http/index.js';
import { idempotencyKeyTables } from '../../../src/http/store.js';
import { outboxTables } from '../../../src/outbox/table.js';
import { kafkaOffsetsTables } from '../../../src/store/kafka-offsets.js';
import { stepChecksum } from '../../../src/store/ledger.js';
import { dedupTables } from '../../../src/store/migrate.js';
import { applyMigrations, migrationLockKeys } from '../../../src/store/migrator.js';
import type { TableFamily } from '../../../src/store/table-family.js';
import { memorySource } from '../../../src/testing/index.js';
import { createTestDatabase, type TestDatabase } from '../../helpers/db.js';
import { waitFor } from '../../helpers/wait-for.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase('migrations');
});

/** Each test its own schema: the ledger is per schema. */
let schemas = 0;
async function freshSchema(): Promise<string> {
  const schema = `${db.schema}_${++schemas}`;
  created.push(schema); // the migrations create it; dropped at the end of the file

  return schema;
}
const created: string[] = [];
afterAll(async () => {
  for (const schema of created) await db.pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await db.close();
});

async function ledger(schema: string) {
  const { rows } = await db.pool.query<{ family: string; table_name: string; version: number }>(
    `SELECT family, table_name, version, checksum FROM "${schema}".effectively_once_migrations ORDER BY family, table_name, version`,
  );
  return rows;
}

const regclass = async (name: string): Promise<string | null> =>
  (await db.pool.query<{ r: string | null }>('SELECT to_regclass($1)::text AS r', [name])).rows[0]!
    .r;

describe('applyMigrations', () => {
  it('creates the tables on a fresh schema and records step 1 of each; a re-run does nothing', async () => {
    const schema = await freshSchema();
    const families: Array<[TableFamily, string]> = [
      [dedupTables, 'processed_messages'],
      [kafkaOffsetsTables, 'eo_kafka_offsets'],
      [idempotencyKeyTables, 'eo_idempotency_keys'],
      [outboxTables, 'eo_outbox'],
    ];
    for (const [family, table] of families) {
      const ref = { schema, table };
      expect(await applyMigrations(db.pool, family, ref)).toEqual({
        applied: [1],
        version: 1,
        unknown: [],
      });
      expect(await regclass(`"${schema}"."${table}"`)).toBe(`${schema}.${table}`);
    }
    expect(await ledger(schema)).toEqual(
      families
        .map(([family, table]) => ({
          family: family.name,
          table_name: table,
          version: 1,
          checksum: stepChecksum(family.steps({ schema, table })[0]!),
        }))
        .sort((a, b) => a.family.localeCompare(b.family)),
    );
    for (const [family, table] of families)
      expect(await applyMigrations(db.pool, family, { schema, table })).toEqual({
        applied: [],
        version: 1,
        unknown: [],
      });
  });

  it('a re-run takes no lock: it completes beside an open transaction that writes the table', async () => {
    const schema = await freshSchema();
    const ref = { schema, table: 'busy' };
    await applyMigrations(db.pool, dedupTables, ref);
    const claim = await db.pool.connect();
    try {
      await claim.query('BEGIN');
      await claim.query(`INSERT INTO "${schema}".busy (consumer, message_key) VALUES ('c', 'k') `);
      // Step 1 run again would queue (CREATE INDEX takes the table's SHARE lock).
      let timer: NodeJS.Timeout | undefined;
      const rerun = await Promise.race([
        applyMigrations(db.pool, dedupTables, ref),
        new Promise((resolve) => (timer = setTimeout(() => resolve('queued'), 3000))),
      ]).finally(() => clearTimeout(timer));
      expect(rerun).toEqual({ applied: [], version: 1, unknown: [] });
    } finally {
      await claim.query('ROLLBACK');
      claim.release();
    }
  });

  it('two migrators of one table: one applies the step, the other finds it applied', async () => {
    const schema = await freshSchema();
    const ref = { schema, table: 'both_at_once' };
    const [classid, objid] = migrationLockKeys(dedupTables.name, ref);
    const waiters = async () =>
      (
        await db.pool.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_locks
            WHERE locktype = 'advisory' AND classid = $1::bigint::oid AND objid = $2::bigint::oid
              AND objsubid = 2 AND NOT granted`,
          [classid, objid >>> 0],
        )
      ).rows[0]!.n;
    // Both get past their first look and queue for the table's lock held here.
    const holder = await db.pool.connect();
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT pg_advisory_xact_lock($1, $2)', [classid, objid]);
      const both = [
        applyMigrations(db.pool, dedupTables, ref),
        applyMigrations(db.pool, dedupTables, ref),
      ];
      await waitFor(async () => (await waiters()) === 2, {
        what: 'both migrations waiting for the lock',
      });
      await holder.query('COMMIT');
      const outcomes = await Promise.all(both);
      expect(outcomes.map((o) => o.applied).sort()).toEqual([[], [1]]);
    } finally {
      holder.release();
    }
    expect((await ledger(schema)).map((r) => r.version)).toEqual([1]);
  });

  it('many migrators of every family at once on a schema without a ledger all succeed, once each', async () => {
    const schema = await freshSchema();
    const families = [dedupTables, kafkaOffsetsTables, idempotencyKeyTables, outboxTables];
    const outcomes = await Promise.all(
      families.flatMap((family) =>
        Array.from({ length: 3 }, () =>
          applyMigrations(db.pool, family, { schema, table: family.defaultTable }),
        ),
      ),
    );
    expect(outcomes.filter((o) => o.applied.length > 0)).toHaveLength(families.length);
    expect(outcomes.every((o) => o.version === 1)).toBe(true);
    expect((await ledger(schema)).map((r) => r.family).sort()).toEqual(
      families.map((f) => f.name).sort(),
    );
  });

  it('adopts a table this version made before the ledger recorded it, keeping its rows', async () => {
    const schema = await freshSchema();
    const ref = { schema, table: 'before_ledger' };
    await applyMigrations(db.pool, dedupTables, ref);
    await db.pool.query(
      `INSERT INTO "${schema}".before_ledger (consumer, message_key) VALUES ('c', 'kept')`,
    );
    await db.pool.query(`DELETE FROM "${schema}".effectively_once_migrations`);
    expect(await applyMigrations(db.pool, dedupTables, ref)).toMatchObject({ applied: [1] });
    const { rows } = await db.pool.query(`SELECT message_key FROM "${schema}".before_ledger`);
    expect(rows).toEqual([{ message_key: 'kept' }]);
  });

  it('makes a table dropped by hand again: its ledger rows describe a table that is gone', async () => {
    const schema = await freshSchema();
    const ref = { schema, table: 'dropped' };
    await applyMigrations(db.pool, dedupTables, ref);
    await db.pool.query(`DROP TABLE "${schema}".dropped`);
    expect(await applyMigrations(db.pool, dedupTables, ref)).toMatchObject({ applied: [1] });
    expect(await regclass(`"${schema}".dropped`)).toBe(`${schema}.dropped`);
    expect((await ledger(schema)).map((r) => r.version)).toEqual([1]);
  });

  it('refuses a step recorded with another checksum, and runs nothing', async () => {
    const schema = await freshSchema();
    const ref = { schema, table: 'edited' };
    await applyMigrations(db.pool, dedupTables, ref);
    await db.pool.query(
      `UPDATE "${schema}".effectively_once_migrations SET checksum = 'not-this-version'`,
    );
    await db.pool.query(`DROP INDEX "${schema}".edited_processed_at_idx`);
    const refused = await applyMigrations(db.pool, dedupTables, ref).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(MigrationChecksumError);
    expect(refused).toMatchObject({
      code: 'EO_MIGRATION_CHECKSUM',
      details: { family: 'consumer', schema, table: 'edited', version: 1 },
    });
    // Not re-run: the dropped index stays dropped.
    expect(await regclass(`"${schema}".edited_processed_at_idx`)).toBeNull();
    // The consumer refuses to start on it, migrating or not.
    for (const migrate of [true, false]) {
      const consumer = createConsumer({
        name: 'c',
        pool: db.pool,
        schema,
        table: 'edited',
        migrate,
        source: memorySource(),
        handler: async () => undefined,
      });
      await expect(consumer.start()).rejects.toBeInstanceOf(MigrationChecksumError);
      await consumer.stop();
    }
  });

  it('accepts a ledger ahead of this version (a newer version migrated, then rolled back)', async () => {
    const schema = await freshSchema();
    const ref = { schema, table: 'ahead' };
    await applyMigrations(db.pool, dedupTables, ref);
    await db.pool.query(
      `INSERT INTO "${schema}".effectively_once_migrations (family, table_name, version, checksum, summary)
       VALUES ('consumer', 'ahead', 2, 'from-a-newer-version', 'a column')`,
    );
    expect(await applyMigrations(db.pool, dedupTables, ref)).toEqual({
      applied: [],
      version: 2,
      unknown: [2],
    });
    const consumer = createConsumer({
      name: 'c',
      pool: db.pool,
      schema,
      table: 'ahead',
      migrate: false,
      source: memorySource(),
      handler: async () => undefined,
    });
    await consumer.start();
    await consumer.stop();
  });
});

describe('migrate: false', () => {
  it('the consumer refuses to start on a table behind this version, and starts once migrated', async () => {
    const schema = await freshSchema();
    const make = () =>
      createConsumer({
        name: 'c',
        pool: db.pool,
        schema,
        migrate: false,
        source: memorySource(),
        handler: async () => undefined,
      });
    const early = make();
    const refused = await early.start().catch((e: unknown) => e);
    await early.stop();
    expect(refused).toBeInstanceOf(MigrationsPendingError);
    expect(refused).toMatchObject({
      code: 'EO_MIGRATIONS_PENDING',
      details: { family: 'consumer', schema, table: 'processed_messages', pending: [1] },
    });
    // Nothing was created by the check.
    expect(await regclass(`"${schema}".processed_messages`)).toBeNull();
    await applyMigrations(db.pool, dedupTables, { schema, table: 'processed_messages' });
    const late = make();
    await late.start();
    await late.stop();
  });

  it('the HTTP door answers no request on a key table behind this version, and runs once migrated', async () => {
    const schema = await freshSchema();
    const idempotency = createIdempotency({ pool: db.pool, scope: 's', schema, migrate: false });
    const request = () =>
      new Request('http://x/pay', {
        method: 'POST',
        headers: { 'idempotency-key': 'k-1' },
        body: '{}',
      });
    let ran = 0;
    const handler = async () => {
      ran++;
      return new Response('ok', { status: 201 });
    };
    try {
      const refused = await idempotency.handle(request(), handler);
      expect(refused.status).toBeGreaterThanOrEqual(500);
      expect(ran).toBe(0);
      await applyMigrations(db.pool, idempotencyKeyTables, {
        schema,
        table: 'eo_idempotency_keys',
      });
      expect((await idempotency.handle(request(), handler)).status).toBe(201);
      expect(ran).toBe(1);
    } finally {
      await idempotency.close();
    }
  });
});
