// The Prisma bridge (adapters/prisma) against real Postgres, through Prisma 7's own
// interactive transaction over @prisma/adapter-pg: what the DataLayer contract
// (src/data-layer.ts) asks of it, one promise at a time.
import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { prismaLayer } from 'effectively-once/prisma';
import { LONGEST_TIMER_MS, PRISMA_TIMEOUT_MARGIN_MS } from '../../../adapters/prisma/limits.js';
import type { DataLayer } from '../../../src/data-layer.js';
import {
  isSerializationFailure,
  isStatementError,
  isUnavailable,
  sqlstateOf,
} from '../../../src/store/pg-errors.js';
import { blockUntilBackendGone } from '../../helpers/block-until-backend-gone.js';
import { createTestDatabase, databaseUrl, type TestDatabase } from '../../helpers/db.js';
import { waitFor } from '../../helpers/wait-for.js';
import { prismaClient, PrismaRollback, type PrismaTx } from './prisma.fixture.js';
import { PrismaPg } from '@prisma/adapter-pg';
import { PrismaClient } from '../../../kit/prisma/client.js';

const settings = { timeoutMs: 30_000, acquireTimeoutMs: 10_000 };

let db: TestDatabase;
let prisma: PrismaClient;
let layer: DataLayer<PrismaTx>;

/** The test schema's connection string: Prisma's queries resolve `layer_effects` in it. */
function schemaUrl(schema: string): string {
  const url = new URL(databaseUrl());
  url.searchParams.set('options', `-c search_path=${schema}`);
  return url.toString();
}

async function untilActive(pid: number, running: string): Promise<void> {
  await waitFor(async () => {
    const { rows } = await db.pool.query(
      "SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND state = 'active' AND query LIKE $2",
      [pid, `%${running}%`],
    );
    return rows.length === 1;
  });
}

async function untilGone(pid: number): Promise<void> {
  await waitFor(async () => {
    const { rows } = await db.pool.query('SELECT 1 FROM pg_stat_activity WHERE pid = $1', [pid]);
    return rows.length === 0;
  });
}

/**
 * What a terminated backend looks like through the bridge: the server's FATAL 57P01 when
 * pg read it as the statement's answer, or, when pg had read it and the close before, the
 * error of a connection that is gone (no SQLSTATE), returned as it is. Which one depends
 * on when pg read the socket; neither is a statement's ERROR.
 */
function expectLostConnection(raw: unknown): void {
  const seen = layer.serverError(raw);
  expect(isStatementError(seen)).toBe(false);
  if (sqlstateOf(seen) === undefined) {
    expect(seen).toBe(raw);
    expect(isUnavailable(seen)).toBe(true); // pg's "Connection terminated…", not another failure
  } else expect(seen).toMatchObject({ code: '57P01', severity: 'FATAL' });
}

async function committed(id: string): Promise<number[]> {
  const { rows } = await db.pool.query<{ amount: number }>(
    'SELECT amount FROM layer_effects WHERE id = $1',
    [id],
  );
  return rows.map((r) => r.amount);
}

/** Runs `body` in the layer's transaction and returns how it ended. */
async function outcome<T>(
  body: (tx: PrismaTx) => Promise<T>,
  on: DataLayer<PrismaTx> = layer,
): Promise<{ value: T } | { error: unknown }> {
  return on.transaction(settings, body).then(
    (value) => ({ value }),
    (error: unknown) => ({ error }),
  );
}

/** Runs `run` with the layer of a Prisma client of its own, disconnected after. */
async function onOwnClient<T>(run: (own: DataLayer<PrismaTx>) => Promise<T>): Promise<T> {
  const own = prismaClient(schemaUrl(db.schema));
  try {
    return await run(prismaLayer(own));
  } finally {
    await own.$disconnect();
  }
}

function failure(result: { value: unknown } | { error: unknown }): unknown {
  if (!('error' in result)) throw new Error('the transaction committed');
  return result.error;
}

beforeAll(async () => {
  db = await createTestDatabase('prisma_bridge');
  await db.pool.query(`
    CREATE TABLE layer_effects (id text PRIMARY KEY, door text NOT NULL, amount integer NOT NULL);
    CREATE FUNCTION refuse_negative() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF NEW.amount < 0 THEN
        RAISE EXCEPTION 'negative amount at commit' USING ERRCODE = '23514';
      END IF;
      RETURN NULL;
    END $$;
    CREATE CONSTRAINT TRIGGER refuse_negative AFTER INSERT ON layer_effects
      DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION refuse_negative();
    CREATE TABLE unique_at_commit (k text, CONSTRAINT k_unique UNIQUE (k) DEFERRABLE INITIALLY DEFERRED);
  `);
  prisma = prismaClient(schemaUrl(db.schema));
  layer = prismaLayer(prisma);
});

afterAll(async () => {
  await prisma?.$disconnect();
  await db?.close();
});

describe('prismaLayer: the transaction', () => {
  it('commits what the body wrote through the model and through sql(tx) when it resolves', async () => {
    const result = await layer.transaction(settings, async (tx) => {
      await tx.layerEffect.create({ data: { id: 'c-model', door: 'test', amount: 1 } });
      await layer
        .sql(tx)
        .query('INSERT INTO layer_effects (id, door, amount) VALUES ($1, $2, $3)', [
          'c-sql',
          'test',
          2,
        ]);
      return 'done';
    });
    expect(result).toBe('done');
    expect(await committed('c-model')).toEqual([1]);
    expect(await committed('c-sql')).toEqual([2]);
  });

  it('rolls back and rejects with what the body threw, once, when it rejects', async () => {
    const thrown = new PrismaRollback();
    const body = jest.fn(async (tx: PrismaTx) => {
      await tx.layerEffect.create({ data: { id: 'r-1', door: 'test', amount: 1 } });
      await layer
        .sql(tx)
        .query('INSERT INTO layer_effects (id, door, amount) VALUES ($1, $2, $3)', [
          'r-2',
          'test',
          1,
        ]);
      throw thrown;
    });
    expect(failure(await outcome(body))).toBe(thrown);
    expect(body).toHaveBeenCalledTimes(1);
    expect(await committed('r-1')).toEqual([]);
    expect(await committed('r-2')).toEqual([]);
  });

  it('is one transaction on one connection: sql(tx) and the model see each other, no one else sees either', async () => {
    await layer.transaction(settings, async (tx) => {
      const sql = layer.sql(tx);
      await tx.layerEffect.create({ data: { id: 'own-1', door: 'test', amount: 7 } });
      const read = await sql.query<{ id: string; amount: number }>(
        'SELECT id, amount FROM layer_effects WHERE id = $1',
        ['own-1'],
      );
      expect(read).toEqual({ rows: [{ id: 'own-1', amount: 7 }], rowCount: 1 });

      const inserted = await sql.query<{ id: string }>(
        'INSERT INTO layer_effects (id, door, amount) VALUES ($1, $2, $3), ($4, $2, $3) RETURNING id',
        ['own-2', 'test', 8, 'own-3'],
      );
      expect(inserted).toEqual({ rows: [{ id: 'own-2' }, { id: 'own-3' }], rowCount: 2 });
      const updated = await sql.query(
        'UPDATE layer_effects SET amount = amount + 1 WHERE id = ANY($1)',
        [['own-1', 'own-2', 'own-3']],
      );
      expect(updated).toEqual({ rows: [], rowCount: 3 });
      expect(await tx.layerEffect.findUnique({ where: { id: 'own-2' } })).toEqual({
        id: 'own-2',
        door: 'test',
        amount: 9,
      });

      // The same server transaction and session for both (xid, backend pid).
      const viaSql = await sql.query<{ xid: string; pid: number }>(
        'SELECT pg_current_xact_id()::text AS xid, pg_backend_pid() AS pid',
      );
      const viaModel = await tx.$queryRaw<Array<{ xid: string; pid: number }>>`
        SELECT pg_current_xact_id()::text AS xid, pg_backend_pid() AS pid`;
      expect(viaSql.rows).toEqual(viaModel);
      expect(await committed('own-1')).toEqual([]);
    });
    expect(await committed('own-1')).toEqual([8]);
  });

  it('binds the value kinds the library sends: text, numbers, booleans, null, bytes, arrays', async () => {
    await layer.transaction(settings, async (tx) => {
      const { rows } = await layer
        .sql(tx)
        .query<Record<string, string | null>>(
          'SELECT $1::text AS t, $2::int::text AS i, $3::boolean::text AS b, $4::text AS n,' +
            " encode($5::bytea, 'hex') AS x, array_to_string($6::text[], ',') AS a",
          ['one', 42, true, null, Buffer.from([0xde, 0xad]), ['p', 'q']],
        );
      expect(rows).toEqual([{ t: 'one', i: '42', b: 'true', n: null, x: 'dead', a: 'p,q' }]);
    });
  });
  it("reads bytea as a Buffer, as pg does (the library compares a stored hash with Buffer's equals)", async () => {
    const hash = Buffer.from('c0ffee', 'hex');
    const { rows } = await layer.transaction(settings, (tx) =>
      layer
        .sql(tx)
        .query<{ hash: Buffer; n: string }>('SELECT $1::bytea AS hash, $2::text AS n', [hash, 'x']),
    );
    expect(Buffer.isBuffer(rows[0]!.hash)).toBe(true);
    expect(rows[0]!.hash.equals(hash)).toBe(true);
    expect(rows[0]!.n).toBe('x');
  });
  it('cannot read a void column (Prisma fails the statement after it ran): cast it to text', async () => {
    await layer.transaction(settings, async (tx) => {
      const sql = layer.sql(tx);
      const voidColumn = await sql
        .query("SELECT set_config('eo.t', 'ran', true), pg_sleep(0)")
        .then(
          () => 'read',
          (error: unknown) => error,
        );
      expect(voidColumn).toMatchObject({
        code: 'P2010',
        meta: {
          driverAdapterError: { cause: { kind: 'UnsupportedNativeDataType', type: 'void' } },
        },
      });
      // No answer of the server's inside: not a statement error, returned as it is.
      expect(layer.serverError(voidColumn)).toBe(voidColumn);
      // The statement ran all the same, and the transaction goes on.
      expect((await sql.query<{ v: string }>("SELECT current_setting('eo.t') AS v")).rows).toEqual([
        { v: 'ran' },
      ]);
      expect((await sql.query('SELECT pg_sleep(0)::text AS slept')).rows).toEqual([{ slept: '' }]);
    });
  });
});

describe('prismaLayer: serverError', () => {
  it('a deferred constraint failing at COMMIT: the SQLSTATE at severity ERROR, nothing committed', async () => {
    const result = await outcome(async (tx) => {
      await tx.layerEffect.create({ data: { id: 'neg', door: 'test', amount: -1 } });
    });
    const error = layer.serverError(failure(result));
    expect(error).toMatchObject({ code: '23514', severity: 'ERROR' });
    expect(isStatementError(error)).toBe(true);
    expect(await committed('neg')).toEqual([]);
  });

  it('a deferred unique constraint at COMMIT (a kind adapter-pg maps): 23505 at severity ERROR', async () => {
    const result = await outcome(async (tx) => {
      const sql = layer.sql(tx);
      await sql.query('INSERT INTO unique_at_commit (k) VALUES ($1), ($1)', ['twice']);
    });
    const error = layer.serverError(failure(result));
    expect(error).toMatchObject({ code: '23505', severity: 'ERROR' });
    expect(isStatementError(error)).toBe(true);
  });

  it('a serialization failure (40001) from a model call and from sql(tx), the body run once', async () => {
    await db.pool.query("INSERT INTO layer_effects VALUES ('race', 'test', 1)");
    const body = jest.fn(async (tx: PrismaTx) => {
      const sql = layer.sql(tx);
      await sql.query('SET TRANSACTION ISOLATION LEVEL REPEATABLE READ');
      await tx.layerEffect.findUnique({ where: { id: 'race' } }); // takes the snapshot
      await db.pool.query("UPDATE layer_effects SET amount = 2 WHERE id = 'race'");
      const viaSql = await sql
        .query("UPDATE layer_effects SET amount = 3 WHERE id = 'race'")
        .catch((e: unknown) => e);
      expect(layer.serverError(viaSql)).toMatchObject({ code: '40001', severity: 'ERROR' });
      // The failed statement aborted the transaction: a model call in it gets 25P02.
      await tx.layerEffect.update({ where: { id: 'race' }, data: { amount: 4 } });
    });
    const error = layer.serverError(failure(await outcome(body)));
    expect(error).toMatchObject({ code: '25P02', severity: 'ERROR' });
    expect(body).toHaveBeenCalledTimes(1);

    const modelBody = jest.fn(async (tx: PrismaTx) => {
      await layer.sql(tx).query('SET TRANSACTION ISOLATION LEVEL REPEATABLE READ');
      await tx.layerEffect.findUnique({ where: { id: 'race' } });
      await db.pool.query("UPDATE layer_effects SET amount = 5 WHERE id = 'race'");
      await tx.layerEffect.update({ where: { id: 'race' }, data: { amount: 6 } });
    });
    const conflict = layer.serverError(failure(await outcome(modelBody)));
    expect(conflict).toMatchObject({ code: '40001', severity: 'ERROR' });
    expect(isSerializationFailure(conflict)).toBe(true);
    expect(modelBody).toHaveBeenCalledTimes(1);
    expect(await committed('race')).toEqual([5]);
  });

  // Each on a client of its own: adapter-pg releases a transaction's connection to pg's
  // pool without an error even when it died, so the pool may hand it to the next
  // transaction before pg has seen the close (which then fails at its first statement).
  it("the transaction's backend terminated during a statement: not a statement error", async () => {
    const result = await onOwnClient((own) =>
      outcome(async (tx) => {
        const sql = own.sql(tx);
        const { rows } = await sql.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
        const pid = rows[0]!.pid;
        const running = sql.query('SELECT 1 AS one FROM pg_sleep(30)');
        running.catch(() => undefined); // it may fail before it is awaited below
        await untilActive(pid, 'pg_sleep');
        await db.pool.query('SELECT pg_terminate_backend($1)', [pid]);
        await running;
      }, own),
    );
    expectLostConnection(failure(result));
  });

  it("the transaction's backend terminated before COMMIT: COMMIT's failure is not a statement error", async () => {
    const result = await onOwnClient((own) =>
      outcome(async (tx) => {
        await tx.layerEffect.create({ data: { id: 'gone', door: 'test', amount: 1 } });
        const { rows } = await own.sql(tx).query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
        await db.pool.query('SELECT pg_terminate_backend($1)', [rows[0]!.pid]);
        blockUntilBackendGone(rows[0]!.pid);
      }, own),
    );
    expectLostConnection(failure(result));
    expect(await committed('gone')).toEqual([]);
  });

  it('a connection already lost when the next statement is sent: not a statement error', async () => {
    let lost: unknown = 'not sent';
    const result = await onOwnClient((own) =>
      outcome(async (tx) => {
        const sql = own.sql(tx);
        const { rows } = await sql.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
        await db.pool.query('SELECT pg_terminate_backend($1)', [rows[0]!.pid]);
        await untilGone(rows[0]!.pid); // the event loop runs: pg reads the FATAL and the close
        lost = await sql.query('SELECT 1 AS one').catch((e: unknown) => e);
      }, own),
    );
    expectLostConnection(lost);
    expectLostConnection(failure(result));
  });
});

describe("prismaLayer: the client's own transaction options", () => {
  it('a default isolation level of the client gives way to the one the library sets first', async () => {
    const serializable = new PrismaClient({
      adapter: new PrismaPg({ connectionString: schemaUrl(db.schema) }, { schema: db.schema }),
      transactionOptions: { isolationLevel: 'Serializable' },
    });
    try {
      const own = prismaLayer(serializable);
      const levels = await own.transaction(settings, async (tx) => {
        const sql = own.sql(tx);
        await sql.query('SET TRANSACTION ISOLATION LEVEL READ COMMITTED');
        return sql.query<{ transaction_isolation: string }>('SHOW transaction_isolation');
      });
      expect(levels.rows).toEqual([{ transaction_isolation: 'read committed' }]);
      // Without the library's statement the client's default holds: the option is Prisma's.
      const unset = await own.transaction(settings, (tx) =>
        own.sql(tx).query<{ transaction_isolation: string }>('SHOW transaction_isolation'),
      );
      expect(unset.rows).toEqual([{ transaction_isolation: 'serializable' }]);
    } finally {
      await serializable.$disconnect();
    }
  });
});

describe("prismaLayer: Prisma's transaction limits", () => {
  it("passes the door's limits to $transaction as timeout (plus the margin) and maxWait", async () => {
    const spy = jest.spyOn(prisma, '$transaction');
    try {
      await layer.transaction({ timeoutMs: 12_000, acquireTimeoutMs: 3_000 }, async () => 1);
      expect(spy.mock.calls[0]?.[1]).toEqual({
        timeout: 12_000 + PRISMA_TIMEOUT_MARGIN_MS,
        maxWait: 3_000,
      });
    } finally {
      spy.mockRestore();
    }
  });

  it('no limit of the door (0) is the longest timer Node keeps, which Prisma accepts as such', async () => {
    const spy = jest.spyOn(prisma, '$transaction');
    try {
      // An overflowing timer would fire at once and expire the transaction before its
      // second statement.
      await layer.transaction({ timeoutMs: 0, acquireTimeoutMs: 0 }, async (tx) => {
        await tx.layerEffect.findMany();
        await new Promise((resolve) => setTimeout(resolve, 50));
        await tx.layerEffect.create({ data: { id: 'nolimit', door: 'test', amount: 1 } });
      });
      expect(spy.mock.calls[0]?.[1]).toEqual({
        timeout: LONGEST_TIMER_MS,
        maxWait: LONGEST_TIMER_MS,
      });
    } finally {
      spy.mockRestore();
    }
    expect(await committed('nolimit')).toEqual([1]);
  });

  it("maxWait reaches Prisma: with the only connection taken, starting fails after the door's wait", async () => {
    const single = prismaClient(schemaUrl(db.schema), { max: 1 });
    const singleLayer = prismaLayer(single);
    try {
      let release!: () => void;
      const held = new Promise<void>((resolve) => (release = resolve));
      let started!: () => void;
      const holding = new Promise<void>((resolve) => (started = resolve));
      const first = singleLayer.transaction(settings, async (tx) => {
        await tx.layerEffect.findMany();
        started();
        await held;
      });
      await holding;
      const body = jest.fn(async () => undefined);
      const second = await singleLayer
        .transaction({ timeoutMs: 30_000, acquireTimeoutMs: 100 }, body)
        .then(
          () => 'started',
          (error: unknown) => error,
        );
      release();
      await first;
      expect(body).not.toHaveBeenCalled();
      expect(second).toMatchObject({ code: 'P2028' });
      expect(String((second as Error).message)).toContain('Unable to start a transaction');
    } finally {
      await single.$disconnect();
    }
  });
});
