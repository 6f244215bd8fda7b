/**
 * The Kysely bridge on its own (kyselyLayer over PostgresDialect and a pg pool), against
 * real Postgres: Kysely's callback transaction commits and rolls back the library's
 * statements with the effect; what it throws at COMMIT carries the server's answer; a
 * lost backend does not look like one; what ctx.tx refuses.
 */
import { randomInt } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import { CamelCasePlugin, Kysely, PostgresDialect, sql, type Transaction } from 'kysely';
import type pg from 'pg';
import { kyselyLayer } from 'effectively-once/kysely';
import { enqueue, migrateOutbox } from 'effectively-once/outbox';
import { createTestDatabase, databaseUrl, type TestDatabase } from '../../helpers/db.js';
import { waitFor } from '../../helpers/wait-for.js';
import { kyselyPool, type EffectsDatabase } from './kysely.fixture.js';

interface ServerAnswer {
  code?: unknown;
  severity?: unknown;
}

let testDb: TestDatabase;
let pool: pg.Pool;
let db: Kysely<EffectsDatabase>;
const layer = () => kyselyLayer(db);
const settings = { timeoutMs: 0, acquireTimeoutMs: 0 };

beforeAll(async () => {
  testDb = await createTestDatabase('kysely_bridge');
  pool = kyselyPool({
    connectionString: databaseUrl(),
    options: `-c search_path=${testDb.schema}`,
  });
  db = new Kysely<EffectsDatabase>({ dialect: new PostgresDialect({ pool }) });
  // The matrix's table, plus a way to hold COMMIT: a row of door 'held' takes, at COMMIT,
  // the advisory lock its amount names (the test holds it on another connection).
  await testDb.pool.query(`
    CREATE TABLE layer_effects (id text PRIMARY KEY, door text NOT NULL, amount integer NOT NULL);
    CREATE FUNCTION layer_effects_check() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF NEW.amount < 0 THEN
        RAISE EXCEPTION 'negative amount' USING ERRCODE = 'check_violation';
      END IF;
      IF NEW.door = 'held' THEN PERFORM pg_advisory_xact_lock(NEW.amount); END IF;
      RETURN NULL;
    END $$;
    CREATE CONSTRAINT TRIGGER layer_effects_check AFTER INSERT ON layer_effects
      DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION layer_effects_check();`);
  await migrateOutbox(testDb.pool, { schema: testDb.schema });
});
afterAll(async () => {
  await db.destroy();
  await testDb.close();
});
beforeEach(async () => {
  await testDb.pool.query('TRUNCATE layer_effects');
});

async function effectIds(): Promise<string[]> {
  const { rows } = await testDb.pool.query<{ id: string }>(
    'SELECT id FROM layer_effects ORDER BY id',
  );
  return rows.map((row) => row.id);
}

async function rejectionOf(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => {
      throw new Error('resolved, a rejection was expected');
    },
    (error: unknown) => error,
  );
}

/** Holds advisory lock `key` on a connection of the test's until the returned release. */
async function holdLock(key: number): Promise<() => Promise<void>> {
  const holder = await testDb.pool.connect();
  await holder.query('SELECT pg_advisory_lock($1)', [key]);
  return async () => {
    await holder.query('SELECT pg_advisory_unlock($1)', [key]);
    holder.release();
  };
}

/** Waits until backend `pid` is waiting for an advisory lock (its COMMIT, held). */
async function waitUntilHeld(pid: number): Promise<void> {
  await waitFor(
    async () =>
      (
        await testDb.pool.query(
          "SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND wait_event = 'advisory'",
          [pid],
        )
      ).rowCount === 1,
    { what: `backend ${pid} waiting at COMMIT` },
  );
}

async function backendPid(tx: Transaction<EffectsDatabase>): Promise<number> {
  const { rows } = await layer().sql(tx).query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
  return rows[0]!.pid;
}

describe('kyselyLayer: the transaction', () => {
  it("commits the library's statements and the effect together when the body resolves", async () => {
    const value = await layer().transaction(settings, async (tx) => {
      await layer()
        .sql(tx)
        .query('INSERT INTO layer_effects (id, door, amount) VALUES ($1, $2, $3)', [
          'claim',
          'library',
          1,
        ]);
      await tx
        .insertInto('layer_effects')
        .values({ id: 'effect', door: 'kysely', amount: 2 })
        .execute();
      return 'done';
    });
    expect(value).toBe('done');
    expect(await effectIds()).toEqual(['claim', 'effect']);
  });

  it('rolls both back when the body rejects, and rejects with what it threw', async () => {
    const thrown = new Error('handler failed');
    const error = await rejectionOf(
      layer().transaction(settings, async (tx) => {
        await layer()
          .sql(tx)
          .query("INSERT INTO layer_effects (id, door, amount) VALUES ('claim', 'library', 1)");
        await tx
          .insertInto('layer_effects')
          .values({ id: 'effect', door: 'kysely', amount: 2 })
          .execute();
        throw thrown;
      }),
    );
    expect(error).toBe(thrown);
    expect(await effectIds()).toEqual([]);
  });

  it("sql(tx) runs on the transaction's connection and sees its uncommitted writes", async () => {
    await layer().transaction(settings, async (tx) => {
      await tx
        .insertInto('layer_effects')
        .values({ id: 'effect', door: 'kysely', amount: 2 })
        .execute();
      const runner = layer().sql(tx);
      const seen = await runner.query<{ amount: number }>(
        'SELECT amount FROM layer_effects WHERE id = $1',
        ['effect'],
      );
      expect(seen.rows).toEqual([{ amount: 2 }]);
      const outside = await testDb.pool.query('SELECT 1 FROM layer_effects');
      expect(outside.rowCount).toBe(0);
      const xids = await runner.query<{ xid: string }>('SELECT pg_current_xact_id()::text AS xid');
      const builderXid = await sql<{
        xid: string;
      }>`SELECT pg_current_xact_id()::text AS xid`.execute(tx);
      expect(xids.rows[0]!.xid).toBe(builderXid.rows[0]!.xid);
    });
  });

  it('reports affected rows from INSERT, UPDATE and DELETE, and none for SELECT', async () => {
    await layer().transaction(settings, async (tx) => {
      const runner = layer().sql(tx);
      const insert = await runner.query(
        "INSERT INTO layer_effects (id, door, amount) VALUES ('a', 'x', 1), ('b', 'x', 1)",
      );
      expect(insert).toEqual({ rows: [], rowCount: 2 });
      const update = await runner.query<{ id: string }>(
        'UPDATE layer_effects SET amount = 3 WHERE id = $1 RETURNING id',
        ['a'],
      );
      expect(update).toEqual({ rows: [{ id: 'a' }], rowCount: 1 });
      const select = await runner.query('SELECT id FROM layer_effects');
      expect(select.rowCount).toBeNull();
      expect(select.rows).toHaveLength(2);
    });
  });

  it("reads the library's columns as Postgres names them, whatever plugins the user's Kysely has", async () => {
    const camel = db.withPlugin(new CamelCasePlugin());
    const layerOfCamel = kyselyLayer(camel);
    await layerOfCamel.transaction(settings, async (tx) => {
      const { rows } = await layerOfCamel
        .sql(tx)
        .query<{ door_name: string }>("SELECT 'kysely' AS door_name");
      expect(rows).toEqual([{ door_name: 'kysely' }]);
    });
  });

  it('sets no isolation level of its own: the first statement in the body sets it', async () => {
    await layer().transaction(settings, async (tx) => {
      const runner = layer().sql(tx);
      await runner.query('SET TRANSACTION ISOLATION LEVEL SERIALIZABLE');
      const { rows } = await runner.query<{ level: string }>(
        'SELECT current_setting($1) AS level',
        ['transaction_isolation'],
      );
      expect(rows).toEqual([{ level: 'serializable' }]);
    });
  });
});

describe('kyselyLayer: an outbox row enqueued through sql(tx)', () => {
  async function outboxIds(): Promise<string[]> {
    const { rows } = await testDb.pool.query<{ id: string }>(
      `SELECT id::text FROM ${testDb.table('eo_outbox')} ORDER BY id`,
    );
    return rows.map((row) => row.id);
  }

  it('commits with the effect', async () => {
    const before = await outboxIds();
    const id = await layer().transaction(settings, async (tx) => {
      await tx
        .insertInto('layer_effects')
        .values({ id: 'effect', door: 'kysely', amount: 1 })
        .execute();
      return enqueue(
        layer().sql(tx),
        { destination: 'orders', payload: { order: 1 }, orderingKey: 'o-1' },
        { schema: testDb.schema },
      );
    });
    expect(await outboxIds()).toEqual([...before, id].sort());
    expect(await effectIds()).toEqual(['effect']);
  });

  it('is rolled back with it', async () => {
    const before = await outboxIds();
    const thrown = new Error('handler failed');
    const error = await rejectionOf(
      layer().transaction(settings, async (tx) => {
        await tx
          .insertInto('layer_effects')
          .values({ id: 'effect', door: 'kysely', amount: 1 })
          .execute();
        await enqueue(
          layer().sql(tx),
          { destination: 'orders', payload: 'x' },
          { schema: testDb.schema },
        );
        throw thrown;
      }),
    );
    expect(error).toBe(thrown);
    expect(await outboxIds()).toEqual(before);
    expect(await effectIds()).toEqual([]);
  });
});

describe('kyselyLayer: what Kysely throws, read by serverError', () => {
  it('a deferred constraint failing at COMMIT: the SQLSTATE, severity ERROR, nothing committed', async () => {
    const error = await rejectionOf(
      layer().transaction(settings, async (tx) => {
        await layer()
          .sql(tx)
          .query("INSERT INTO layer_effects (id, door, amount) VALUES ('claim', 'library', 1)");
        await tx
          .insertInto('layer_effects')
          .values({ id: 'effect', door: 'kysely', amount: -1 })
          .execute();
      }),
    );
    expect(layer().serverError(error)).toMatchObject({ code: '23514', severity: 'ERROR' });
    expect(await effectIds()).toEqual([]);
  });

  it('a serialization failure: 40001, severity ERROR', async () => {
    await testDb.pool.query("INSERT INTO layer_effects VALUES ('row', 'x', 1)");
    const error = await rejectionOf(
      layer().transaction(settings, async (tx) => {
        await layer().sql(tx).query('SET TRANSACTION ISOLATION LEVEL REPEATABLE READ');
        await tx.selectFrom('layer_effects').selectAll().execute(); // the snapshot
        await testDb.pool.query("UPDATE layer_effects SET amount = 2 WHERE id = 'row'");
        await tx.updateTable('layer_effects').set({ amount: 3 }).where('id', '=', 'row').execute();
      }),
    );
    expect(layer().serverError(error)).toMatchObject({ code: '40001', severity: 'ERROR' });
  });

  it('the backend terminated while COMMIT is on the wire: not an ERROR answer of the server', async () => {
    const key = randomInt(1, 2 ** 31 - 1);
    const release = await holdLock(key);
    let pid = 0;
    try {
      const commit = rejectionOf(
        layer().transaction(settings, async (tx) => {
          pid = await backendPid(tx);
          await tx
            .insertInto('layer_effects')
            .values({ id: 'held', door: 'held', amount: key })
            .execute();
        }),
      );
      await waitFor(() => pid !== 0, { what: 'the body to run' });
      await waitUntilHeld(pid);
      await testDb.pool.query('SELECT pg_terminate_backend($1)', [pid]);
      const reported = layer().serverError(await commit) as ServerAnswer;
      expect(reported.severity).not.toBe('ERROR');
    } finally {
      await release();
    }
    expect(await effectIds()).toEqual([]);
  });

  it('the backend terminated during a statement of the body: not an ERROR answer of the server', async () => {
    let pid = 0;
    const failed = rejectionOf(
      layer().transaction(settings, async (tx) => {
        pid = await backendPid(tx);
        await sql`SELECT pg_sleep(30)`.execute(tx);
      }),
    );
    await waitFor(() => pid !== 0, { what: 'the body to run' });
    await waitFor(
      async () =>
        (
          await testDb.pool.query(
            "SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND wait_event = 'PgSleep'",
            [pid],
          )
        ).rowCount === 1,
    );
    await testDb.pool.query('SELECT pg_terminate_backend($1)', [pid]);
    const reported = layer().serverError(await failed) as ServerAnswer;
    expect(reported.severity).not.toBe('ERROR');
  });

  it("the backend gone before the body threw: rejects with the body's error, not ROLLBACK's", async () => {
    const thrown = new Error('handler failed');
    const error = await rejectionOf(
      layer().transaction(settings, async (tx) => {
        const pid = await backendPid(tx);
        await testDb.pool.query('SELECT pg_terminate_backend($1)', [pid]);
        await waitFor(
          async () =>
            (await testDb.pool.query('SELECT 1 FROM pg_stat_activity WHERE pid = $1', [pid]))
              .rowCount === 0,
          { what: `backend ${pid} gone` },
        );
        throw thrown;
      }),
    );
    expect(error).toBe(thrown);
  });

  it('a statement cancelled by the pid read in the transaction (pg_cancel_backend): 57014, rolled back, the connection reusable', async () => {
    let pid = 0;
    const cancelled = rejectionOf(
      layer().transaction(settings, async (tx) => {
        pid = await backendPid(tx);
        await tx
          .insertInto('layer_effects')
          .values({ id: 'effect', door: 'kysely', amount: 1 })
          .execute();
        await sql`SELECT pg_sleep(30)`.execute(tx);
      }),
    );
    await waitFor(() => pid !== 0, { what: 'the body to run' });
    await waitFor(
      async () =>
        (
          await testDb.pool.query(
            "SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND wait_event = 'PgSleep'",
            [pid],
          )
        ).rowCount === 1,
    );
    await testDb.pool.query('SELECT pg_cancel_backend($1)', [pid]);
    expect(layer().serverError(await cancelled)).toMatchObject({
      code: '57014',
      severity: 'ERROR',
    });
    expect(await effectIds()).toEqual([]);
    await layer().transaction(settings, async (tx) => {
      await tx
        .insertInto('layer_effects')
        .values({ id: 'next', door: 'kysely', amount: 1 })
        .execute();
    });
    expect(await effectIds()).toEqual(['next']);
  });

  it('COMMIT answered with ROLLBACK (the transaction had failed): a known rollback, 25P02 ERROR', async () => {
    // A statement that fails inside the body, its error swallowed: the transaction is
    // aborted, Kysely's COMMIT gets ROLLBACK back and throws its AbortedTransactionError.
    const error = await rejectionOf(
      layer().transaction(settings, async (tx) => {
        await tx
          .insertInto('layer_effects')
          .values({ id: 'effect', door: 'kysely', amount: 1 })
          .execute();
        await sql`SELECT 1 / 0`.execute(tx).catch(() => undefined);
      }),
    );
    expect((error as Error).name).toBe('AbortedTransactionError');
    expect(layer().serverError(error)).toMatchObject({ code: '25P02', severity: 'ERROR' });
    expect(await effectIds()).toEqual([]);
  });

  it('returns any other error as it is', () => {
    const lost = new Error('Connection terminated unexpectedly');
    expect(layer().serverError(lost)).toBe(lost);
  });
});

describe("kyselyLayer: what the handler's ctx.tx refuses", () => {
  it('a nested tx.transaction(): Kysely refuses it; the claim transaction goes on', async () => {
    await layer().transaction(settings, async (tx) => {
      expect(() => tx.transaction()).toThrow(/not supported/);
      expect(() => tx.connection()).toThrow(/not supported/);
      await tx
        .insertInto('layer_effects')
        .values({ id: 'effect', door: 'kysely', amount: 1 })
        .execute();
    });
    expect(await effectIds()).toEqual(['effect']);
  });

  it('a statement that ends the transaction, written with sql``: refused before it is sent', async () => {
    const refusals: unknown[] = [];
    await layer().transaction(settings, async (tx) => {
      const before = await backendXid(tx);
      await tx
        .insertInto('layer_effects')
        .values({ id: 'effect', door: 'kysely', amount: 1 })
        .execute();
      for (const statement of [
        sql`COMMIT`,
        sql`select 1; rollback`,
        sql`${sql.raw('end')}`,
        sql.raw('ABORT'),
      ])
        refusals.push(await rejectionOf(statement.execute(tx)));
      expect(await backendXid(tx)).toBe(before);
    });
    expect(refusals).toHaveLength(4);
    for (const refusal of refusals) expect(refusal).toMatchObject({ code: 'EO_TX_CONTROL' });
    expect(await effectIds()).toEqual(['effect']);
  });

  it('savepoints stay allowed', async () => {
    await layer().transaction(settings, async (tx) => {
      await sql`SAVEPOINT attempt`.execute(tx);
      await tx
        .insertInto('layer_effects')
        .values({ id: 'undone', door: 'kysely', amount: 1 })
        .execute();
      await sql`ROLLBACK TO SAVEPOINT attempt`.execute(tx);
      await tx
        .insertInto('layer_effects')
        .values({ id: 'kept', door: 'kysely', amount: 1 })
        .execute();
    });
    expect(await effectIds()).toEqual(['kept']);
  });

  it("statements the handler sent while the library's last statement ran: inside the transaction, never after COMMIT", async () => {
    // The body's last statement is the library's (as LayerClaimTransaction's xid check);
    // the handler's statements, sent while it runs, wait in Kysely's queue of the
    // transaction's connection (it sends one statement at a time, COMMIT past the queue).
    // COMMIT fails (a deferred constraint): had one of them run after it, in autocommit,
    // its row would be there.
    let late: Promise<unknown[]> | undefined;
    const error = await rejectionOf(
      layer().transaction(settings, async (tx) => {
        await tx
          .insertInto('layer_effects')
          .values({ id: 'effect', door: 'kysely', amount: -1 })
          .execute();
        const last = layer().sql(tx).query('SELECT pg_sleep(0.1)');
        late = Promise.all(
          ['late-1', 'late-2', 'late-3'].map((id) =>
            tx
              .insertInto('layer_effects')
              .values({ id, door: 'kysely', amount: 1 })
              .execute()
              .catch((refused: unknown) => refused),
          ),
        );
        await last;
      }),
    );
    expect(layer().serverError(error)).toMatchObject({ code: '23514', severity: 'ERROR' });
    await late;
    expect(await effectIds()).toEqual([]);
  });

  it('statements the handler left queued when it threw: inside the transaction, never after ROLLBACK', async () => {
    const thrown = new Error('handler failed');
    let late: Promise<unknown[]> | undefined;
    const error = await rejectionOf(
      layer().transaction(settings, async (tx) => {
        const running = sql`SELECT pg_sleep(0.1)`.execute(tx);
        late = Promise.all(
          ['late-1', 'late-2', 'late-3'].map((id) =>
            tx
              .insertInto('layer_effects')
              .values({ id, door: 'kysely', amount: 1 })
              .execute()
              .catch((refused: unknown) => refused),
          ),
        );
        await running;
        throw thrown;
      }),
    );
    expect(error).toBe(thrown);
    await late;
    expect(await effectIds()).toEqual([]);
  });

  it('a statement sent after the body settled, while COMMIT is on the wire: refused, not autocommitted', async () => {
    const key = randomInt(1, 2 ** 31 - 1);
    const release = await holdLock(key);
    let handlerTx: Transaction<EffectsDatabase> | undefined;
    let pid = 0;
    let late: Promise<unknown> | undefined;
    let committed: Promise<unknown> | undefined;
    try {
      committed = layer().transaction(settings, async (tx) => {
        handlerTx = tx;
        pid = await backendPid(tx);
        await tx
          .insertInto('layer_effects')
          .values({ id: 'held', door: 'held', amount: key })
          .execute();
      });
      await waitFor(() => pid !== 0, { what: 'the body to run' });
      await waitUntilHeld(pid);
      // COMMIT is waiting on the server: Kysely has not marked its transaction ended yet.
      late = rejectionOf(
        handlerTx!
          .insertInto('layer_effects')
          .values({ id: 'late', door: 'kysely', amount: 1 })
          .execute(),
      );
    } finally {
      await release();
    }
    await committed;
    expect(await late).toMatchObject({ code: 'EO_TX_CONTROL' });
    expect(await effectIds()).toEqual(['held']);
  });
});

async function backendXid(tx: Transaction<EffectsDatabase>): Promise<string> {
  const { rows } = await layer()
    .sql(tx)
    .query<{ xid: string }>('SELECT pg_current_xact_id()::text AS xid');
  return rows[0]!.xid;
}
