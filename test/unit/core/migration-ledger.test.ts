/**
 * The migration ledger's logic without a database: which steps are pending, the
 * checksum rule, a ledger ahead of this version, the advisory lock's keys and the
 * statements that record a step.
 */
import { describe, expect, it } from '@jest/globals';
import { MigrationChecksumError, MigrationsPendingError } from '../../../src/errors.js';
import {
  ledgerStatements,
  planMigrations,
  recordStatement,
  stepChecksum,
  stepScript,
} from '../../../src/store/ledger.js';
import { migrationLockKeys, MIGRATION_LOCK_CLASS } from '../../../src/store/migrator.js';
import type { MigrationStep, TableFamily } from '../../../src/store/table-family.js';
import { qualifiedTable } from '../../../src/store/identifiers.js';

const ref = { schema: 'billing', table: 'widgets' };

/** A family of `count` steps, each creating one index on the table. */
function family(count: number, name = 'widgets'): TableFamily {
  return {
    name,
    summary: 'test widgets',
    defaultTable: 'widgets',
    steps: (r) =>
      Array.from({ length: count }, (_, i): MigrationStep => ({
        version: i + 1,
        summary: `step ${i + 1}`,
        statements: [`CREATE INDEX w${i + 1} ON ${qualifiedTable(r)} (c${i + 1})`],
      })),
  };
}

const applied = (f: TableFamily, ...versions: number[]) =>
  f
    .steps(ref)
    .filter((s) => versions.includes(s.version))
    .map((s) => ({ version: s.version, checksum: stepChecksum(s) }));

describe('planMigrations', () => {
  it('on a fresh table every step is pending, in order', () => {
    const plan = planMigrations(family(3), ref, []);
    expect(plan.pending.map((s) => s.version)).toEqual([1, 2, 3]);
    expect(plan).toMatchObject({ version: 0, unknown: [] });
  });

  it('pending is what the ledger lacks; nothing when every step is recorded', () => {
    const f = family(3);
    expect(planMigrations(f, ref, applied(f, 1)).pending.map((s) => s.version)).toEqual([2, 3]);
    const done = planMigrations(f, ref, applied(f, 1, 2, 3));
    expect(done.pending).toEqual([]);
    expect(done.version).toBe(3);
  });

  it('refuses a recorded step whose checksum is not this version’s, naming it', () => {
    const f = family(2);
    const rows = applied(f, 1, 2).map((row) =>
      row.version === 2 ? { ...row, checksum: 'edited' } : row,
    );
    let thrown: unknown;
    try {
      planMigrations(f, ref, rows);
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(MigrationChecksumError);
    expect(thrown).toMatchObject({
      code: 'EO_MIGRATION_CHECKSUM',
      retryable: false,
      details: { family: 'widgets', schema: 'billing', table: 'widgets', version: 2 },
    });
    expect((thrown as Error).message).toContain('step 2 of the widgets table "billing"."widgets"');
  });

  it('accepts a ledger ahead of this version when every known step is applied', () => {
    const newer = family(3);
    const plan = planMigrations(family(2), ref, applied(newer, 1, 2, 3));
    expect(plan).toMatchObject({ pending: [], version: 3, unknown: [3] });
    // Ahead, but a known step missing: still pending.
    const gap = planMigrations(family(2), ref, applied(newer, 1, 3));
    expect(gap.pending.map((s) => s.version)).toEqual([2]);
  });

  it('throws on a family whose versions are not 1, 2, 3...', () => {
    const broken: TableFamily = {
      ...family(1),
      steps: () => [{ version: 2, summary: 'x', statements: [] }],
    };
    expect(() => planMigrations(broken, ref, [])).toThrow('widgets: step 1 has version 2');
  });
});

describe('stepChecksum', () => {
  it('is the statements as rendered for their table, boundaries included', () => {
    const step = family(1).steps(ref)[0]!;
    expect(stepChecksum(step)).toMatch(/^[0-9a-f]{64}$/);
    expect(stepChecksum(family(1).steps(ref)[0]!)).toBe(stepChecksum(step));
    expect(stepChecksum(family(1).steps({ ...ref, table: 'other' })[0]!)).not.toBe(
      stepChecksum(step),
    );
    const split = { version: 1, summary: '', statements: ['SELECT 1', 'SELECT 2'] };
    const joined = { version: 1, summary: '', statements: ['SELECT 1SELECT 2'] };
    expect(stepChecksum(split)).not.toBe(stepChecksum(joined));
    // The summary is not part of it: rewording one is no schema change.
    expect(stepChecksum({ ...split, summary: 'reworded' })).toBe(stepChecksum(split));
  });
});

describe('the ledger statements', () => {
  it('record a step with escaped literals, after its statements', () => {
    const f = family(1, "it's");
    const odd = { schema: 's"x', table: "t'; DROP TABLE y; --" };
    const step = f.steps(odd)[0]!;
    const record = recordStatement(f, odd, step);
    expect(record).toBe(
      `INSERT INTO "s""x"."effectively_once_migrations" (family, table_name, version, checksum, summary)` +
        ` VALUES ('it''s', 't''; DROP TABLE y; --', 1, '${stepChecksum(step)}', 'step 1')`,
    );
    // Step 1 first forgets the table's rows: it runs only when the table is new or gone.
    expect(stepScript(f, odd, step)).toEqual([
      `DELETE FROM "s""x"."effectively_once_migrations" WHERE family = 'it''s' AND table_name = 't''; DROP TABLE y; --'`,
      ...step.statements,
      record,
    ]);
    const two = family(2).steps(ref)[1]!;
    expect(stepScript(family(2), ref, two)).toEqual([
      ...two.statements,
      recordStatement(family(2), ref, two),
    ]);
  });

  it('create the ledger, and the schema unless it exists', () => {
    expect(ledgerStatements('b')).toEqual([
      'CREATE SCHEMA IF NOT EXISTS "b"',
      expect.stringContaining('CREATE TABLE IF NOT EXISTS "b"."effectively_once_migrations" ('),
    ]);
    expect(ledgerStatements('b', true)).toHaveLength(1);
  });
});

describe('migrationLockKeys', () => {
  it('is one lock per family and table, in the migrations’ own class', () => {
    const keys = migrationLockKeys('consumer', ref);
    expect(keys[0]).toBe(MIGRATION_LOCK_CLASS);
    expect(Number.isInteger(keys[1]) && keys[1] >= -(2 ** 31) && keys[1] < 2 ** 31).toBe(true);
    expect(migrationLockKeys('consumer', { ...ref })).toEqual(keys);
    expect(migrationLockKeys('consumer', { ...ref, table: 'other' })).not.toEqual(keys);
    expect(migrationLockKeys('http-keys', ref)).not.toEqual(keys);
    expect(migrationLockKeys('consumer', { schema: 'billingw', table: 'idgets' })).not.toEqual(
      keys,
    );
  });
});

describe('MigrationsPendingError', () => {
  it('names the table, the pending steps and what to run', () => {
    const error = new MigrationsPendingError({ ...ref, family: 'consumer', pending: [1, 2] });
    expect(error).toMatchObject({ code: 'EO_MIGRATIONS_PENDING', retryable: false });
    expect(error.message).toContain('"billing"."widgets" is behind this version');
    expect(error.message).toContain('steps 1, 2 not applied');
    expect(error.message).toContain('effectively-once migrate');
  });
});
