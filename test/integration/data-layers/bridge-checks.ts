import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { LayerTransactionSettings } from '../../../src/data-layer.js';
import { createBridgeDatabase, type BridgeDatabase } from './bridge-database.js';
import { EFFECTS_TABLE, type LayerFixture, type OpenedLayer } from './fixture.js';

// What every bridge must hold to (src/data-layer.ts, "What an implementation must hold
// to"), checked on the layer's real package over a real Postgres: the effect written in
// the layer's idiom and the library's statements commit together or not at all, and the
// error of a failed COMMIT tells the server's answer from a lost connection.

const SETTINGS: LayerTransactionSettings = { timeoutMs: 30_000, acquireTimeoutMs: 10_000 };

/** What a promise settled with, without the test failing on a rejection. */
async function outcome<T>(
  promise: Promise<T>,
): Promise<{ ok: true; value: T } | { ok: false; error: unknown }> {
  try {
    return { ok: true, value: await promise };
  } catch (error) {
    return { ok: false, error };
  }
}

/** A promise and its resolve, to step two transactions in a fixed order. */
function signal(): { promise: Promise<void>; fire: () => void } {
  let fire!: () => void;
  const promise = new Promise<void>((resolve) => (fire = resolve));
  return { promise, fire };
}

/** The bridge checks for one layer fixture, in a describe block of their own. */
export function describeBridgeChecks<Tx>(fixture: LayerFixture<Tx>): void {
  describe(`${fixture.name} bridge`, () => {
    let db: BridgeDatabase;
    let opened: OpenedLayer<Tx>;
    beforeAll(async () => {
      db = await createBridgeDatabase(fixture.name.replace(/\W/g, '_'));
      opened = await fixture.open(db.url);
    });
    afterAll(async () => {
      await opened?.close();
      await db?.drop();
    });

    const insert = `INSERT INTO ${EFFECTS_TABLE} (id, door, amount) VALUES ($1, $2, $3)`;
    // Ids are the table's key: each test's are prefixed with its door (db.effects strips it).
    const effect = (tx: Tx, id: string, door: string, amount: number) =>
      opened.insertEffect(tx, { id: `${door}/${id}`, door, amount });

    it('commits the effect and the library statements together when the body resolves', async () => {
      const { layer } = opened;
      const value = await layer.transaction(SETTINGS, async (tx) => {
        await effect(tx, 'effect', 'commit', 1);
        const written = await layer.sql(tx).query(insert, ['commit/library', 'commit', 2]);
        expect(written.rowCount).toBe(1);
        return 'body value';
      });
      expect(value).toBe('body value');
      expect(await db.effects('commit')).toEqual([
        { id: 'effect', amount: 1 },
        { id: 'library', amount: 2 },
      ]);
    });

    it('rolls both back when the body rejects, rejecting with what it threw', async () => {
      const { layer } = opened;
      const thrown = new Error('the handler failed');
      const result = await outcome(
        layer.transaction(SETTINGS, async (tx) => {
          await effect(tx, 'effect', 'threw', 1);
          await layer.sql(tx).query(insert, ['threw/library', 'threw', 2]);
          throw thrown;
        }),
      );
      expect(result).toEqual({ ok: false, error: thrown });
      expect(await db.effects('threw')).toEqual([]);
    });

    it("rolls both back when the handler rolls back the layer's own way", async () => {
      const { layer } = opened;
      const result = await outcome(
        layer.transaction(SETTINGS, async (tx) => {
          await layer.sql(tx).query(insert, ['layer-rollback/library', 'layer-rollback', 2]);
          await effect(tx, 'effect', 'layer-rollback', 1);
          await opened.layerRollback(tx);
        }),
      );
      expect(result.ok).toBe(false);
      expect(await db.effects('layer-rollback')).toEqual([]);
    });

    it('runs sql(tx) inside the transaction: it sees the effect, others do not yet', async () => {
      const { layer } = opened;
      await layer.transaction(SETTINGS, async (tx) => {
        await effect(tx, 'a', 'sees', 1);
        await effect(tx, 'b', 'sees', 2);
        const run = layer.sql(tx);
        const seen = await run.query<{ id: string; amount: number }>(
          `SELECT id, amount FROM ${EFFECTS_TABLE} WHERE door = $1 AND id = ANY($2::text[]) ORDER BY id`,
          ['sees', ['sees/a', 'sees/b', 'sees/c']],
        );
        expect(seen.rows).toEqual([
          { id: 'sees/a', amount: 1 },
          { id: 'sees/b', amount: 2 },
        ]);
        expect(seen.rowCount).toBe(2);
        const updated = await run.query(
          `UPDATE ${EFFECTS_TABLE} SET amount = amount + $2 WHERE door = $1`,
          ['sees', 10],
        );
        expect(updated).toEqual({ rows: [], rowCount: 2 });
        expect(await db.effects('sees')).toEqual([]);
      });
      expect(await db.effects('sees')).toEqual([
        { id: 'a', amount: 11 },
        { id: 'b', amount: 12 },
      ]);
    });

    it('binds every value as a parameter, as the text numbers them', async () => {
      const { layer } = opened;
      const tricky = "'); DROP TABLE layer_effects; --";
      await layer.transaction(SETTINGS, async (tx) => {
        const { rows } = await layer
          .sql(tx)
          .query<{ literal: string; two: number; one: string; again: boolean; bytes: Buffer }>(
            // `$1` inside a string and a comment is text; $1 twice is one parameter (the
            // second use has no cast of its own); $2 comes before $1; undefined is NULL.
            `SELECT '$1' AS literal /* $2 */, $2::int AS two, $1::text AS one,
                    $1 = $3 AS again, $4::bytea AS bytes, $5::text IS NULL AS "nothing"`,
            [tricky, 2, tricky, Buffer.from([0, 1, 255]), undefined],
          );
        expect(rows).toEqual([
          {
            literal: '$1',
            two: 2,
            one: tricky,
            again: true,
            bytes: Buffer.from([0, 1, 255]),
            nothing: true,
          },
        ]);
      });
      // The table is still there: the text in the value never reached the statement.
      expect(await db.effects('binds')).toEqual([]);
    });

    it('rejects after the body resolved when a deferred constraint fails at COMMIT: ERROR 23514', async () => {
      const { layer } = opened;
      let bodyResolved = false;
      const result = await outcome(
        layer.transaction(SETTINGS, async (tx) => {
          await effect(tx, 'negative', 'deferred', -1);
          await layer.sql(tx).query(insert, ['deferred/library', 'deferred', 2]);
          bodyResolved = true;
        }),
      );
      expect(bodyResolved).toBe(true);
      expect(result.ok).toBe(false);
      if (result.ok) return;
      expect(layer.serverError(result.error)).toMatchObject({
        code: '23514',
        severity: 'ERROR',
      });
      expect(await db.effects('deferred')).toEqual([]);
    });

    it('rejects with a known rollback when a statement failed and was caught before COMMIT', async () => {
      const { layer } = opened;
      const result = await outcome(
        layer.transaction(SETTINGS, async (tx) => {
          await effect(tx, 'effect', 'caught', 1);
          // The server aborts the transaction; whatever catches the error, COMMIT is
          // answered with ROLLBACK, which must not read as committed.
          await layer
            .sql(tx)
            .query('SELECT 1 / 0')
            .catch(() => undefined);
        }),
      );
      expect(result.ok).toBe(false);
      if (result.ok) return;
      expect(layer.serverError(result.error)).toMatchObject({ severity: 'ERROR' });
      expect(await db.effects('caught')).toEqual([]);
    });

    it('surfaces a serialization failure (40001) through serverError', async () => {
      const { layer } = opened;
      const read = [signal(), signal()];
      const firstCommitted = signal();
      // Write skew: each transaction counts the door's effects, then adds one; the second
      // to write, after the first committed, cannot be serialized after it.
      const writer = (index: 0 | 1) =>
        layer.transaction(SETTINGS, async (tx) => {
          const run = layer.sql(tx);
          await run.query('SET TRANSACTION ISOLATION LEVEL SERIALIZABLE');
          await run.query(`SELECT count(*) AS n FROM ${EFFECTS_TABLE} WHERE door = $1`, ['skew']);
          read[index]!.fire();
          await read[1 - index]!.promise;
          if (index === 1) await firstCommitted.promise;
          await effect(tx, `t${index}`, 'skew', 1);
        });
      const first = writer(0).finally(() => firstCommitted.fire());
      const second = outcome(writer(1));
      await first;
      const result = await second;
      expect(result.ok).toBe(false);
      if (result.ok) return;
      expect(layer.serverError(result.error)).toMatchObject({ code: '40001', severity: 'ERROR' });
      expect(await db.effects('skew')).toEqual([{ id: 't0', amount: 1 }]);
    });

    it.each([
      ['at COMMIT', false],
      ['at the next statement', true],
    ])(
      'a backend terminated mid-transaction fails %s with no statement error',
      async (_where, statementAfter) => {
        const { layer } = opened;
        const door = `terminated-${String(statementAfter)}`;
        let thrown: unknown;
        const result = await outcome(
          layer.transaction(SETTINGS, async (tx) => {
            await effect(tx, 'effect', door, 1);
            const run = layer.sql(tx);
            const { rows } = await run.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
            await db.terminate(rows[0]!.pid);
            if (statementAfter)
              await run.query('SELECT 1').catch((error: unknown) => {
                thrown = error;
                throw error;
              });
          }),
        );
        const thrownFirst = thrown !== undefined;
        expect(result.ok).toBe(false);
        if (result.ok) return;
        // A body that rejected before the transaction did gives the transaction its
        // error, whatever the ROLLBACK after it met. (postgres.js rejects as soon as the
        // connection closes, before the body's statement: postgres-js.bridge.test.ts.)
        if (thrownFirst) expect(result.error).toBe(thrown);
        const answer = layer.serverError(result.error) as { severity?: unknown } | null;
        // No server answer (a closed connection), or the FATAL the server ended it with:
        // never an ERROR, which would read as a known rollback.
        expect([undefined, 'FATAL']).toContain(answer?.severity);
        expect(await db.effects(door)).toEqual([]);
      },
    );
  });
}
