/**
 * knexLayer against real Postgres, through Knex 3's own `knex.transaction(async (trx) =>
 * …)`: what the claim transaction relies on — commit and rollback as the body ends, the
 * library's `$1…` statements inside the handler's transaction, a failure at COMMIT and
 * a serialization failure reported with the server's SQLSTATE and severity, a lost
 * backend never reported as a statement's error, and a handler's own `trx.rollback()`
 * or `trx.commit()` refused before it ends the claim's transaction.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import knexFactory, { type Knex } from 'knex';
import { knexLayer, LIBRARY_QUERY_CONTEXT } from 'effectively-once/knex';
import type { DataLayer, LayerTransactionSettings } from '../../../src/data-layer.js';
import { createTestDatabase, databaseUrl, type TestDatabase } from '../../helpers/db.js';
import { waitFor } from '../../helpers/wait-for.js';

const SETTINGS: LayerTransactionSettings = { timeoutMs: 0, acquireTimeoutMs: 5_000 };

let db: TestDatabase;
let knex: Knex;
let layer: DataLayer<Knex.Transaction>;

beforeAll(async () => {
  db = await createTestDatabase('knex_bridge');
  await db.pool.query(`
    CREATE TABLE effects (id text PRIMARY KEY, amount integer NOT NULL);
    CREATE FUNCTION effects_nonnegative() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF NEW.amount < 0 THEN
        RAISE EXCEPTION 'negative amount %', NEW.amount USING ERRCODE = '23514';
      END IF;
      RETURN NULL;
    END $$;
    CREATE CONSTRAINT TRIGGER effects_nonnegative AFTER INSERT ON effects
      DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION effects_nonnegative();
  `);
  knex = knexFactory({
    client: 'pg',
    connection: { connectionString: databaseUrl(), options: `-c search_path=${db.schema}` },
    pool: { min: 0, max: 5 },
  });
  layer = knexLayer(knex);
});

afterAll(async () => {
  await knex.destroy();
  await db.close();
});

beforeEach(async () => {
  await db.pool.query('TRUNCATE effects');
});

async function committed(id: string): Promise<boolean> {
  const { rows } = await db.pool.query('SELECT 1 FROM effects WHERE id = $1', [id]);
  return rows.length === 1;
}

/** A promise and its resolve, to step two transactions in a fixed order. */
function gate(): { opened: Promise<void>; open: () => void } {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { opened, open };
}

/** The pg-shaped server error inside `error`, as the bridge reports it. */
function server(error: unknown): { code?: unknown; severity?: unknown } {
  return layer.serverError(error) as { code?: unknown; severity?: unknown };
}

describe('knexLayer transaction', () => {
  it("commits the body's writes when it resolves, and resolves with its value", async () => {
    let kept: Knex.Transaction | undefined;
    const value = await layer.transaction(SETTINGS, async (trx) => {
      kept = trx;
      await trx('effects').insert({ id: 'c1', amount: 1 });
      return 'done';
    });
    expect(value).toBe('done');
    expect(await committed('c1')).toBe(true);
    // Over: a library statement is refused, and not as one the handler caused.
    const late = await layer
      .sql(kept!)
      .query('SELECT 1')
      .catch((error: unknown) => error);
    expect(late).toMatchObject({ code: 'EO_TX_CONTROL' });
    expect((late as { details: unknown }).details).toEqual({});
  });

  it('rolls back when the body rejects, and rejects with what it threw', async () => {
    const thrown = new Error('handler failed');
    await expect(
      layer.transaction(SETTINGS, async (trx) => {
        await trx('effects').insert({ id: 'r1', amount: 1 });
        throw thrown;
      }),
    ).rejects.toBe(thrown);
    expect(await committed('r1')).toBe(false);
  });

  it("runs sql(trx) in the transaction: it sees the body's uncommitted writes", async () => {
    await layer.transaction(SETTINGS, async (trx) => {
      await trx('effects').insert({ id: 's1', amount: 1 });
      const inside = await layer
        .sql(trx)
        .query<{ n: number }>('SELECT count(*)::int AS n FROM effects WHERE id = $1', ['s1']);
      expect(inside.rows).toEqual([{ n: 1 }]);
      expect(await committed('s1')).toBe(false);
      const insert = await layer
        .sql(trx)
        .query('INSERT INTO effects (id, amount) VALUES ($1, $2), ($3, $2)', ['s2', 2, 's3']);
      expect(insert).toEqual({ rows: [], rowCount: 2 });
    });
    expect([await committed('s1'), await committed('s2'), await committed('s3')]).toEqual([
      true,
      true,
      true,
    ]);
  });

  it('binds `$2 … $1` in the order the statement asks, and a repeated `$1` each time', async () => {
    const result = await layer.transaction(SETTINGS, (trx) =>
      layer
        .sql(trx)
        .query(
          'SELECT $2::text AS b, $1::text AS a, $1::text || $1::text AS aa, $3::text[] AS list',
          ['first', 'second', ['x', 'y']],
        ),
    );
    expect(result).toEqual({
      rows: [{ b: 'second', a: 'first', aa: 'firstfirst', list: ['x', 'y'] }],
      rowCount: 1,
    });
  });

  it('sends a literal `?` of the statement as it is', async () => {
    const result = await layer.transaction(SETTINGS, (trx) =>
      layer
        .sql(trx)
        .query(`SELECT '?'::text AS q, '??'::text AS qq, $1::jsonb ?$2 AS has`, ['{"k":1}', 'k']),
    );
    expect(result.rows).toEqual([{ q: '?', qq: '??', has: true }]);
  });
});

describe('knexLayer failures', () => {
  it('reports a deferred constraint failing at COMMIT with its SQLSTATE and severity ERROR', async () => {
    let bodyResolved = false;
    const failure = await layer
      .transaction(SETTINGS, async (trx) => {
        await trx('effects').insert({ id: 'd1', amount: -1 });
        bodyResolved = true;
      })
      .then(
        () => undefined,
        (error: unknown) => error,
      );
    expect(bodyResolved).toBe(true);
    expect(server(failure)).toMatchObject({ code: '23514', severity: 'ERROR' });
    expect(await committed('d1')).toBe(false);
  });

  it('reports a serialization failure as 40001, severity ERROR', async () => {
    const bothRead = { a: gate(), b: gate() };
    const bInserted = gate();
    const serializable = async (
      trx: Knex.Transaction,
      id: string,
      mine: { open: () => void },
      theirs: { opened: Promise<void> },
    ): Promise<void> => {
      await layer.sql(trx).query('SET TRANSACTION ISOLATION LEVEL SERIALIZABLE');
      await layer.sql(trx).query('SELECT sum(amount) FROM effects');
      mine.open();
      await theirs.opened;
      await trx('effects').insert({ id, amount: 1 });
    };
    const a = layer.transaction(SETTINGS, async (trx) => {
      await serializable(trx, 'a', bothRead.a, bothRead.b);
      await bInserted.opened;
    });
    const b = layer.transaction(SETTINGS, async (trx) => {
      await serializable(trx, 'b', bothRead.b, bothRead.a);
      bInserted.open();
      await a;
    });
    await a;
    const failure = await b.then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(server(failure)).toMatchObject({ code: '40001', severity: 'ERROR' });
    expect([await committed('a'), await committed('b')]).toEqual([true, false]);
  });

  it("does not report a terminated backend as a statement's error", async () => {
    let pid = 0;
    const failure = await layer
      .transaction(SETTINGS, async (trx) => {
        const { rows } = await layer
          .sql(trx)
          .query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
        pid = rows[0]!.pid;
        const sleeping = layer.sql(trx).query('SELECT pg_sleep(60)');
        await waitFor(async () => {
          const { rows: active } = await db.pool.query(
            `SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND query LIKE '%pg_sleep(60)%' AND state = 'active'`,
            [pid],
          );
          return active.length === 1;
        });
        await db.pool.query('SELECT pg_terminate_backend($1)', [pid]);
        await sleeping;
      })
      .then(
        () => undefined,
        (error: unknown) => error,
      );
    expect(failure).toBeInstanceOf(Error);
    expect(server(failure).severity).not.toBe('ERROR');
    // Knex's pool drops the dead connection: the next transaction gets a working one.
    await expect(
      layer.transaction(SETTINGS, (trx) => layer.sql(trx).query('SELECT 1 AS one')),
    ).resolves.toEqual({ rows: [{ one: 1 }], rowCount: 1 });
  });
});

describe('statements the handler leaves behind', () => {
  it('reports a COMMIT that Postgres answered with ROLLBACK as a known rollback', async () => {
    // A handler that swallowed its own statement's error: the transaction is aborted, and
    // Postgres answers COMMIT with the tag ROLLBACK, not with an error.
    const failure = await layer
      .transaction(SETTINGS, async (trx) => {
        await trx('effects').insert({ id: 'a1', amount: 1 });
        await trx.raw('SELECT 1/0').catch(() => undefined);
      })
      .then(
        () => 'resolved',
        (error: unknown) => error,
      );
    expect(server(failure)).toMatchObject({ code: '25P02', severity: 'ERROR' });
    expect(await committed('a1')).toBe(false);
  });

  it('refuses transaction control sent through trx, which would leave COMMIT on nothing', async () => {
    // A ROLLBACK after the library's last statement: Postgres would answer the bridge's
    // COMMIT with a warning and the tag COMMIT, the claim rolled back.
    const refused: unknown[] = [];
    await layer.transaction(SETTINGS, async (trx) => {
      await trx('effects').insert({ id: 'tc1', amount: 1 });
      await layer.sql(trx).query('SELECT 1');
      for (const statement of ['ROLLBACK', 'select 1; commit', 'BEGIN']) {
        refused.push(await trx.raw(statement).catch((error: unknown) => error));
      }
      // Savepoints stay the handler's way to recover from a statement it expects to fail.
      await trx.raw('SAVEPOINT s');
      await trx.raw('ROLLBACK TO SAVEPOINT s');
    });
    expect(refused).toEqual([
      expect.objectContaining({ code: 'EO_TX_CONTROL' }),
      expect.objectContaining({ code: 'EO_TX_CONTROL' }),
      expect.objectContaining({ code: 'EO_TX_CONTROL' }),
    ]);
    expect(await committed('tc1')).toBe(true);
  });

  it('refuses a statement sent once COMMIT or ROLLBACK was: it never runs outside', async () => {
    const late: Array<Promise<unknown>> = [];
    const sendLate = (trx: Knex.Transaction, id: string): void => {
      // After the body settled and Knex sent COMMIT/ROLLBACK, before their answer.
      setImmediate(() =>
        late.push(
          trx('effects')
            .insert({ id, amount: 1 })
            .catch((error: unknown) => error),
        ),
      );
    };
    await layer.transaction(SETTINGS, async (trx) => {
      await trx('effects').insert({ id: 'l1', amount: 1 });
      sendLate(trx, 'l2');
    });
    await layer
      .transaction(SETTINGS, async (trx) => {
        sendLate(trx, 'l3');
        throw new Error('handler failed');
      })
      .catch(() => undefined);
    await waitFor(() => late.length === 2);
    const answers = await Promise.all(late);
    expect(answers.map((a) => (a as Error).message)).toEqual([
      expect.stringMatching(/already complete/),
      expect.stringMatching(/already complete/),
    ]);
    expect([await committed('l1'), await committed('l2'), await committed('l3')]).toEqual([
      true,
      false,
      false,
    ]);
  });
});

describe('a handler that tries to end the Knex transaction itself', () => {
  it("trx.rollback(): refused before it is sent; the transaction stays the claim's", async () => {
    let refused: unknown;
    let inside: unknown;
    const failure = await layer
      .transaction(SETTINGS, async (trx) => {
        await trx('effects').insert({ id: 'h1', amount: 1 });
        refused = await trx.rollback().catch((error: unknown) => error);
        // Still the claim's transaction: the library's statements run inside it.
        inside = (
          await layer
            .sql(trx)
            .query<{ open: boolean }>('SELECT pg_current_xact_id_if_assigned() IS NOT NULL AS open')
        ).rows[0]?.open;
        throw new Error('the handler gives up');
      })
      .then(
        () => undefined,
        (error: unknown) => error,
      );
    expect(refused).toMatchObject({ code: 'EO_TX_CONTROL', details: { call: 'rollback' } });
    expect(inside).toBe(true);
    expect(failure).toMatchObject({ message: 'the handler gives up' });
    expect(await committed('h1')).toBe(false);
  });

  it("trx.commit(): refused; what the handler wrote commits with the bridge's COMMIT", async () => {
    let refused: unknown;
    const value = await layer.transaction(SETTINGS, async (trx) => {
      await trx('effects').insert({ id: 'h2', amount: 1 });
      refused = await trx.commit().catch((error: unknown) => error);
      await trx('effects').insert({ id: 'h3', amount: 1 });
      return 'returned';
    });
    expect(refused).toMatchObject({ code: 'EO_TX_CONTROL', details: { call: 'commit' } });
    expect(value).toBe('returned');
    expect([await committed('h2'), await committed('h3')]).toEqual([true, true]);
  });
});

describe('knexLayer(knex)', () => {
  it("marks the library's statements for a postProcessResponse hook", async () => {
    // A hook that hands back rows alone, as many apps do, except for the library's.
    const hooked = knexFactory({
      client: 'pg',
      connection: { connectionString: databaseUrl(), options: `-c search_path=${db.schema}` },
      pool: { min: 0, max: 1 },
      postProcessResponse: (result: { rows?: unknown }, context: unknown) =>
        context === LIBRARY_QUERY_CONTEXT ? result : result.rows,
    });
    try {
      const hookedLayer = knexLayer(hooked);
      const rows = await hookedLayer.transaction(SETTINGS, async (trx) => {
        const appRows: unknown = await trx.raw('SELECT 1 AS app');
        const library = await hookedLayer.sql(trx).query('SELECT 2 AS library');
        return [appRows, library];
      });
      expect(rows).toEqual([[{ app: 1 }], { rows: [{ library: 2 }], rowCount: 1 }]);
    } finally {
      await hooked.destroy();
    }
  });

  it('refuses a Knex whose driver is not node-postgres', async () => {
    // CockroachDB's Knex client shares Postgres's dialect name; no connection is made.
    const cockroach = knexFactory({ client: 'cockroachdb' });
    try {
      expect(() => knexLayer(cockroach)).toThrow(/driver is cockroachdb/);
    } finally {
      await cockroach.destroy();
    }
  });

  it('refuses a transaction in place of the knex instance', async () => {
    await knex.transaction(async (trx) => {
      expect(() => knexLayer(trx)).toThrow(/not a transaction/);
    });
  });
});
