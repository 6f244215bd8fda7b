/**
 * The TypeORM bridge on its own, against real Postgres: `dataSource.transaction` commits
 * and rolls back as the DataLayer contract says, the library's statements run in the
 * handler's transaction, and each way a COMMIT fails reaches `serverError` as the
 * library must classify it (a server's ERROR: known; a backend gone: not a statement
 * error). The shared guarantee matrix runs in typeorm.test.ts.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import type { EntityManager } from 'typeorm';
import { typeormLayer } from 'effectively-once/typeorm';
import type { DataLayer, LayerTransactionSettings } from '../../../src/data-layer.js';
import { StateError } from '../../../src/errors.js';
import {
  isSerializationFailure,
  isStatementError,
  isTransactionTimeout,
} from '../../../src/store/pg-errors.js';
import { createTestDatabase, databaseUrl, type TestDatabase } from '../../helpers/db.js';
import { waitFor } from '../../helpers/wait-for.js';
import type { OpenedLayer } from './fixture.js';
import { LayerEffectEntity, openDataSource, typeormFixture } from './typeorm.fixture.js';

const settings: LayerTransactionSettings = { timeoutMs: 0, acquireTimeoutMs: 10_000 };

let db: TestDatabase;
let opened: OpenedLayer<EntityManager>;
let layer: DataLayer<EntityManager>;

/** The test database's URL, its sessions' search_path set to `schema`. */
function urlIn(schema: string): string {
  const url = new URL(databaseUrl());
  url.searchParams.set('options', `-c search_path=${schema}`);
  return url.toString();
}

beforeAll(async () => {
  db = await createTestDatabase('typeorm_bridge');
  // layer_effects as the matrix makes it: a deferred constraint trigger fails at COMMIT
  // on a negative amount. slow_commit's deferred trigger sleeps inside COMMIT.
  await db.pool.query(`
    CREATE TABLE layer_effects (id text PRIMARY KEY, door text NOT NULL, amount integer NOT NULL);
    CREATE FUNCTION layer_effects_check() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF NEW.amount < 0 THEN
          RAISE EXCEPTION 'negative amount %', NEW.amount USING ERRCODE = 'check_violation';
        END IF;
        RETURN NULL;
      END $$;
    CREATE CONSTRAINT TRIGGER layer_effects_amount AFTER INSERT OR UPDATE ON layer_effects
      DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION layer_effects_check();
    CREATE TABLE slow_commit (id text);
    CREATE FUNCTION slow_commit_fn() RETURNS trigger LANGUAGE plpgsql AS
      $$ BEGIN PERFORM pg_sleep(60); RETURN NULL; END $$;
    CREATE CONSTRAINT TRIGGER slow_commit_trg AFTER INSERT ON slow_commit
      DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION slow_commit_fn();
    CREATE TABLE ssi (class int NOT NULL, value int NOT NULL);`);
  opened = await typeormFixture.open(urlIn(db.schema));
  layer = opened.layer;
});
afterAll(async () => {
  await opened.close();
  await db.close();
});
beforeEach(async () => {
  await db.pool.query('TRUNCATE layer_effects, slow_commit, ssi');
});

async function effectIds(): Promise<string[]> {
  const { rows } = await db.pool.query<{ id: string }>('SELECT id FROM layer_effects ORDER BY id');
  return rows.map((r) => r.id);
}

async function backendPid(tx: EntityManager): Promise<number> {
  const { rows } = await layer.sql(tx).query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
  return rows[0]!.pid;
}

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    (value) => {
      throw new Error(`expected a rejection, got ${String(value)}`);
    },
    (error: unknown) => error,
  );
}

describe('typeormLayer: the transaction', () => {
  it("commits when the body resolves, with the body's value", async () => {
    const value = await layer.transaction(settings, async (tx) => {
      await opened.insertEffect(tx, { id: 'a', door: 'bridge', amount: 1 });
      return 'done';
    });
    expect(value).toBe('done');
    expect(await effectIds()).toEqual(['a']);
  });

  it('rolls back when the body rejects, rejecting with what it threw', async () => {
    const thrown = new Error('handler failed');
    const error = await rejection(
      layer.transaction(settings, async (tx) => {
        await opened.insertEffect(tx, { id: 'b', door: 'bridge', amount: 1 });
        throw thrown;
      }),
    );
    expect(error).toBe(thrown);
    expect(await effectIds()).toEqual([]);
  });

  it("refuses the transaction's manager once the transaction is over: nothing written late", async () => {
    let kept: EntityManager | undefined;
    await layer.transaction(settings, async (tx) => {
      kept = tx;
    });
    await expect(
      opened.insertEffect(kept!, { id: 'late', door: 'bridge', amount: 1 }),
    ).rejects.toMatchObject({ name: 'QueryRunnerAlreadyReleasedError' });
    await expect(kept!.transaction(async () => undefined)).rejects.toThrow(/released/i);
    expect(await effectIds()).toEqual([]);
  });

  it("the fixture's layerRollback (the query runner's rollbackTransaction) undoes the effect", async () => {
    const error = await rejection(
      layer.transaction(settings, async (tx) => {
        await opened.insertEffect(tx, { id: 'c', door: 'bridge', amount: 1 });
        return opened.layerRollback(tx);
      }),
    );
    expect((error as Error).message).toMatch(/rollbackTransaction/);
    expect(await effectIds()).toEqual([]);
  });
});

describe('typeormLayer: sql(tx)', () => {
  it("runs in the handler's transaction: sees its writes, which nobody else sees before COMMIT", async () => {
    await layer.transaction(settings, async (tx) => {
      await tx.getRepository(LayerEffectEntity).insert({ id: 'd', door: 'bridge', amount: 2 });
      const seen = await layer
        .sql(tx)
        .query<{ id: string; amount: number }>(
          'SELECT id, amount FROM layer_effects WHERE id = $1',
          ['d'],
        );
      expect(seen).toEqual({ rows: [{ id: 'd', amount: 2 }], rowCount: 1 });
      expect(await effectIds()).toEqual([]);
      // The library's own write, in the same transaction: rowCount as pg reports it.
      const inserted = await layer
        .sql(tx)
        .query(
          'INSERT INTO layer_effects (id, door, amount) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING',
          ['e', 'library', 3],
        );
      expect(inserted).toEqual({ rows: [], rowCount: 1 });
      const skipped = await layer
        .sql(tx)
        .query('INSERT INTO layer_effects VALUES ($1, $2, $3) ON CONFLICT DO NOTHING', [
          'd',
          'library',
          3,
        ]);
      expect(skipped.rowCount).toBe(0);
    });
    expect(await effectIds()).toEqual(['d', 'e']);
  });

  it('passes the text and the values to pg untouched: Buffers, arrays, null, a literal ?', async () => {
    const row = await layer.transaction(settings, async (tx) => {
      const { rows } = await layer
        .sql(tx)
        .query<{ q: string; b: string; a: string; n: string | null }>(
          "SELECT '?:$1' AS q, encode($1::bytea, 'hex') AS b, array_to_string($2::text[], ',') AS a, $3::text AS n",
          [Buffer.from([0xde, 0xad]), ['x', 'y'], null],
        );
      return rows[0];
    });
    expect(row).toEqual({ q: '?:$1', b: 'dead', a: 'x,y', n: null });
  });

  it('refuses a manager with no query runner of its own (dataSource.manager)', async () => {
    await layer.transaction(settings, async (tx) => {
      expect(() => layer.sql(tx.connection.manager)).toThrow(StateError);
    });
  });

  it("refuses the handler's commit, rollback and release of the claim's query runner", async () => {
    const refused: unknown[] = [];
    const value = await layer.transaction(settings, async (tx) => {
      const runner = tx.queryRunner!;
      await opened.insertEffect(tx, { id: 'f', door: 'bridge', amount: 1 });
      for (const call of [
        () => runner.commitTransaction(),
        () => runner.rollbackTransaction(),
        () => runner.release(),
      ])
        refused.push(await call().catch((error: unknown) => error));
      // Still the claim's transaction, on its connection.
      return (
        await layer
          .sql(tx)
          .query<{ open: boolean }>('SELECT pg_current_xact_id_if_assigned() IS NOT NULL AS open')
      ).rows[0]?.open;
    });
    expect(refused.map((e) => (e as { details?: unknown }).details)).toEqual([
      { call: 'commitTransaction' },
      { call: 'rollbackTransaction' },
      { call: 'release' },
    ]);
    expect(value).toBe(true);
    expect(await effectIds()).toEqual(['f']);
  });

  it('lets a nested tx.transaction(…) (a savepoint) commit and roll back', async () => {
    await layer.transaction(settings, async (tx) => {
      await tx.transaction(async (inner) => {
        await opened.insertEffect(inner, { id: 'kept', door: 'bridge', amount: 1 });
      });
      await tx
        .transaction(async (inner) => {
          await opened.insertEffect(inner, { id: 'undone', door: 'bridge', amount: 1 });
          throw new Error('roll the savepoint back');
        })
        .catch(() => undefined);
    });
    expect(await effectIds()).toEqual(['kept']);
  });
});

describe('typeormLayer: a failed COMMIT through serverError', () => {
  it('a deferred constraint failing at COMMIT: its SQLSTATE at severity ERROR, nothing applied', async () => {
    const error = await rejection(
      layer.transaction(settings, async (tx) => {
        await opened.insertEffect(tx, { id: 'h', door: 'bridge', amount: -1 });
      }),
    );
    expect(error).toMatchObject({ name: 'QueryFailedError', query: 'COMMIT' });
    const server = layer.serverError(error);
    // pg's own error, as node-postgres reports it, not TypeORM's wrapper.
    expect(server).toBeInstanceOf(pg.DatabaseError);
    expect(server).toMatchObject({ code: '23514', severity: 'ERROR' });
    expect(isStatementError(server)).toBe(true);
    expect(await effectIds()).toEqual([]);
    // The connection went back usable: the next transaction commits.
    await layer.transaction(settings, (tx) =>
      opened.insertEffect(tx, { id: 'i', door: 'bridge', amount: 1 }),
    );
    expect(await effectIds()).toEqual(['i']);
  });

  it('a serialization failure at COMMIT (SSI): 40001 at severity ERROR', async () => {
    // Write skew: each reads the class the other writes; the second to COMMIT fails.
    const serializable = 'SET TRANSACTION ISOLATION LEVEL SERIALIZABLE';
    const runs = new Map<number, number>();
    const gate = () => {
      let open!: () => void;
      const opened = new Promise<void>((resolve) => (open = resolve));
      return { open, opened };
    };
    const [firstWrote, secondWrote, firstMayCommit, secondMayCommit] = [
      gate(),
      gate(),
      gate(),
      gate(),
    ];
    const skew = (read: number, write: number, wrote: () => void, mayCommit: Promise<void>) =>
      layer.transaction(settings, async (tx) => {
        runs.set(write, (runs.get(write) ?? 0) + 1);
        await layer.sql(tx).query(serializable);
        await layer.sql(tx).query('SELECT sum(value) FROM ssi WHERE class = $1', [read]);
        await tx.query('INSERT INTO ssi VALUES ($1, 1)', [write]);
        wrote();
        await mayCommit;
        return `class ${write} written`;
      });
    const first = skew(1, 2, firstWrote.open, firstMayCommit.opened);
    const second = skew(2, 1, secondWrote.open, secondMayCommit.opened);
    await Promise.all([firstWrote.opened, secondWrote.opened]);
    // Settled in order below; caught now so that an early failure is not unhandled.
    const secondOutcome = rejection(second);
    firstMayCommit.open();
    expect(await first).toBe('class 2 written');
    secondMayCommit.open();
    const error = await secondOutcome;
    expect(error).toMatchObject({ name: 'QueryFailedError', query: 'COMMIT' });
    const server = layer.serverError(error);
    expect(server).toMatchObject({ code: '40001', severity: 'ERROR' });
    expect(isSerializationFailure(server)).toBe(true);
    // TypeORM retries nothing: each body ran once.
    expect([...runs.entries()].sort()).toEqual([
      [1, 1],
      [2, 1],
    ]);
  });

  it('a serialization failure on a statement: 40001 from the rejection the body passed on', async () => {
    await db.pool.query('INSERT INTO ssi VALUES (1, 1)');
    const error = await rejection(
      layer.transaction(settings, async (tx) => {
        await layer.sql(tx).query('SET TRANSACTION ISOLATION LEVEL REPEATABLE READ');
        await tx.query('SELECT value FROM ssi WHERE class = 1');
        await db.pool.query('UPDATE ssi SET value = 2 WHERE class = 1');
        await tx.query('UPDATE ssi SET value = 3 WHERE class = 1');
      }),
    );
    expect(layer.serverError(error)).toMatchObject({ code: '40001', severity: 'ERROR' });
  });

  it('the backend terminated during COMMIT: FATAL, not a statement error', async () => {
    let pid: number | undefined;
    const outcome = rejection(
      layer.transaction(settings, async (tx) => {
        pid = await backendPid(tx);
        await tx.query('INSERT INTO slow_commit VALUES ($1)', ['j']);
        await opened.insertEffect(tx, { id: 'j', door: 'bridge', amount: 1 });
      }),
    );
    await waitFor(
      async () =>
        pid !== undefined &&
        (
          await db.pool.query(
            "SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND query = 'COMMIT' AND wait_event = 'PgSleep'",
            [pid],
          )
        ).rowCount === 1,
      { what: 'the backend sleeping inside COMMIT' },
    );
    await db.pool.query('SELECT pg_terminate_backend($1)', [pid]);
    const server = layer.serverError(await outcome);
    expect(server).toBeInstanceOf(pg.DatabaseError);
    expect(server).toMatchObject({ code: '57P01', severity: 'FATAL' });
    expect(isStatementError(server)).toBe(false);
    expect(await effectIds()).toEqual([]);
  });

  // A session the server ends while it is idle in the transaction: pg reads the FATAL as
  // the connection's 'error' event, and TypeORM releases the query runner on it, so the
  // COMMIT that follows fails with "Query runner already released" and no server answer.
  // The bridge passes the connection's error on instead: the FATAL the server sent.
  async function endedWhileIdle(end: (tx: EntityManager, pid: number) => Promise<void>) {
    return rejection(
      layer.transaction(settings, async (tx) => {
        const pid = await backendPid(tx);
        await opened.insertEffect(tx, { id: 'k', door: 'bridge', amount: 1 });
        await end(tx, pid);
        await waitFor(() => tx.queryRunner!.isReleased, {
          what: 'TypeORM releasing the query runner on the connection error',
        });
      }),
    );
  }

  it("the backend terminated while the handler ran: the server's FATAL 57P01, not a statement error", async () => {
    const error = await endedWhileIdle(async (_tx, pid) => {
      await db.pool.query('SELECT pg_terminate_backend($1)', [pid]);
    });
    const server = layer.serverError(error);
    expect(server).toMatchObject({ code: '57P01', severity: 'FATAL' });
    expect(isStatementError(server)).toBe(false);
    expect(await effectIds()).toEqual([]);
  });

  it("a library statement after the session ended: the server's FATAL, not the released runner", async () => {
    let statementError: unknown;
    await rejection(
      layer.transaction(settings, async (tx) => {
        const pid = await backendPid(tx);
        await db.pool.query('SELECT pg_terminate_backend($1)', [pid]);
        await waitFor(() => tx.queryRunner!.isReleased, { what: 'the query runner released' });
        statementError = await rejection(layer.sql(tx).query('SELECT 1'));
      }),
    );
    expect(layer.serverError(statementError)).toMatchObject({ code: '57P01', severity: 'FATAL' });
  });

  it("idle_in_transaction_session_timeout ended the session: the server's FATAL 25P03", async () => {
    const error = await endedWhileIdle(async (tx) => {
      await layer.sql(tx).query("SET LOCAL idle_in_transaction_session_timeout = '50ms'");
    });
    const server = layer.serverError(error);
    expect(server).toMatchObject({ code: '25P03', severity: 'FATAL' });
    expect(isTransactionTimeout(server)).toBe(true);
    expect(await effectIds()).toEqual([]);
  });
});

describe("typeormLayer: the handler's nested manager.transaction", () => {
  it("is a savepoint of the claim's transaction: one xid, rolled back with it", async () => {
    const thrown = new Error('outer fails after the nested transaction committed');
    let outerXid: string | undefined;
    let nestedXid: string | undefined;
    const xid = async (tx: EntityManager) =>
      (await layer.sql(tx).query<{ xid: string }>('SELECT txid_current()::text AS xid')).rows[0]!
        .xid;
    const error = await rejection(
      layer.transaction(settings, async (tx) => {
        outerXid = await xid(tx);
        await tx.transaction(async (nested) => {
          await opened.insertEffect(nested, { id: 'l', door: 'nested', amount: 1 });
          nestedXid = await xid(nested);
        });
        expect(await effectIds()).toEqual([]);
        throw thrown;
      }),
    );
    expect(error).toBe(thrown);
    expect(nestedXid).toBe(outerXid);
    expect(await effectIds()).toEqual([]);
  });

  it('a nested transaction that fails rolls back to its savepoint; the outer one commits the rest', async () => {
    await layer.transaction(settings, async (tx) => {
      await opened.insertEffect(tx, { id: 'm', door: 'outer', amount: 1 });
      await rejection(
        tx.transaction(async (nested) => {
          await opened.insertEffect(nested, { id: 'n', door: 'nested', amount: 1 });
          await opened.insertEffect(nested, { id: 'm', door: 'duplicate', amount: 1 });
        }),
      );
      // The transaction is still usable (not aborted) and still the same one.
      expect(tx.queryRunner!.isTransactionActive).toBe(true);
      await layer.sql(tx).query('INSERT INTO layer_effects VALUES ($1, $2, $3)', ['o', 'lib', 1]);
    });
    expect(await effectIds()).toEqual(['m', 'o']);
  });
});

describe('typeormLayer: isolation', () => {
  it("the library's SET TRANSACTION after TypeORM's (a DataSource isolationLevel) decides the level", async () => {
    const dataSource = await openDataSource(urlIn(db.schema), { isolationLevel: 'SERIALIZABLE' });
    try {
      const own = typeormLayer(dataSource);
      const levels = await own.transaction(settings, async (tx) => {
        const show = async () =>
          (await own.sql(tx).query<{ transaction_isolation: string }>('SHOW transaction_isolation'))
            .rows[0]!.transaction_isolation;
        const typeorms = await show();
        await own.sql(tx).query('SET TRANSACTION ISOLATION LEVEL READ COMMITTED');
        return [typeorms, await show()];
      });
      expect(levels).toEqual(['serializable', 'read committed']);
    } finally {
      await dataSource.destroy();
    }
  });
});

describe('typeormLayer: the connection watch', () => {
  it("leaves no listener behind on the pooled connection's 'error' event", async () => {
    const dataSource = await openDataSource(urlIn(db.schema), { poolSize: 1 });
    try {
      const own = typeormLayer(dataSource);
      const counts: number[] = [];
      for (let i = 0; i < 3; i++) {
        await own.transaction(settings, async (tx) => {
          const client = (await tx.queryRunner!.connect()) as pg.PoolClient;
          counts.push(client.listenerCount('error'));
        });
      }
      expect(counts[0]).toBeGreaterThan(0);
      expect(counts).toEqual([counts[0], counts[0], counts[0]]);
    } finally {
      await dataSource.destroy();
    }
  });
});

describe('typeormLayer: construction', () => {
  it('refuses a DataSource that is not postgres', () => {
    const mysql = { options: { type: 'mysql' } } as unknown as Parameters<typeof typeormLayer>[0];
    expect(() => typeormLayer(mysql)).toThrow(/type "postgres"/);
  });
});
