/**
 * The key claim inside a transaction already open (a data layer's): one statement, no
 * BEGIN, `$1…` parameters, every column back as text and decoded here, so a layer that
 * decodes bytea, jsonb or smallint its own way reads the same record.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type pg from 'pg';
import type { SqlRunner } from '../../../src/data-layer.js';
import { KeyStatements, migrateKeyTable, type KeyClaim } from '../../../src/http/store.js';
import { createTestDatabase, type TestDatabase } from '../../helpers/db.js';

let db: TestDatabase;
const keys = () =>
  new KeyStatements({ schema: db.schema, table: 'eo_idempotency_keys' }, undefined, 60_000);

beforeAll(async () => {
  db = await createTestDatabase('layer_claim');
  await migrateKeyTable(db.pool, { schema: db.schema });
});
afterAll(async () => db.close());

/**
 * A runner that answers every column as text, as a layer decoding nothing would: the
 * claim must not depend on the driver's type parsers. Records each statement it ran.
 */
function textRunner(client: pg.PoolClient, ran: string[]): SqlRunner {
  return {
    query: async <R extends object>(text: string, values?: readonly unknown[]) => {
      ran.push(text);
      const result = await client.query({
        text,
        values: values === undefined ? [] : [...values],
        types: { getTypeParser: () => (value: string) => value },
      });
      return { rows: result.rows as R[], rowCount: result.rowCount };
    },
  };
}

/** Runs `body` in a transaction of its own on a client, as a layer would. */
async function inTransaction<T>(
  body: (sql: SqlRunner, ran: string[]) => Promise<T>,
  end: 'COMMIT' | 'ROLLBACK' = 'COMMIT',
): Promise<T> {
  const client = await db.pool.connect();
  try {
    await client.query('BEGIN');
    const ran: string[] = [];
    const value = await body(textRunner(client, ran), ran);
    await client.query(end);
    return value;
  } finally {
    client.release();
  }
}

function claimOf(key: string): KeyClaim {
  return {
    scope: "tenant's ?scope",
    key,
    method: 'POST',
    route: '/charges?x=$1',
    fingerprint: Buffer.from([0, 1, 2, 254, 255]),
  };
}

describe('the claim inside an open transaction', () => {
  it('claims with one statement and no BEGIN, returning the transaction id', async () => {
    const ran: string[] = [];
    const client = await db.pool.connect();
    let claimed: { result: unknown; xid: string };
    try {
      await client.query('BEGIN');
      const result = await keys().claim(
        { sql: textRunner(client, ran), pg: undefined, begins: false },
        claimOf('one-statement'),
        1000,
      );
      const { rows } = await client.query<{ xid: string }>(
        'SELECT pg_current_xact_id()::text AS xid',
      );
      await client.query('COMMIT');
      claimed = { result, xid: rows[0]!.xid };
    } finally {
      client.release();
    }
    expect(claimed.result).toEqual({ kind: 'claimed', xid: claimed.xid });
    expect(ran).toHaveLength(1);
    expect(ran[0]).not.toMatch(/\bBEGIN\b/i);
    expect(ran[0]).not.toContain(';');
  });

  it('reads a committed key back, its response decoded from text', async () => {
    const claim = claimOf('stored');
    await inTransaction(async (sql) => {
      await keys().claim({ sql, pg: undefined, begins: false }, claim, 1000);
      await sql.query(
        keys().storeResponse(claim, {
          status: 201,
          headers: { 'content-type': 'application/json', location: '/charges/1?a=b' },
          body: Buffer.from([123, 0, 255, 125]),
          bodyOmitted: null,
        }),
      );
    });
    const found = await inTransaction(
      (sql) => keys().claim({ sql, pg: undefined, begins: false }, claim, 1000),
      'ROLLBACK',
    );
    expect(found).toEqual({
      kind: 'stored',
      record: {
        method: 'POST',
        route: claim.route,
        fingerprint: claim.fingerprint,
        status: 201,
        headers: { 'content-type': 'application/json', location: '/charges/1?a=b' },
        body: Buffer.from([123, 0, 255, 125]),
        bodyOmitted: null,
      },
    });
  });

  it('reads a key whose body was omitted, with no body', async () => {
    const claim = claimOf('omitted');
    await inTransaction(async (sql) => {
      await keys().claim({ sql, pg: undefined, begins: false }, claim, 1000);
      await sql.query(
        keys().storeResponse(claim, {
          status: 200,
          headers: {},
          body: null,
          bodyOmitted: 'too-large',
        }),
      );
    });
    const found = await inTransaction(
      (sql) => keys().claim({ sql, pg: undefined, begins: false }, claim, 1000),
      'ROLLBACK',
    );
    expect(found).toMatchObject({
      kind: 'stored',
      record: { status: 200, headers: {}, body: null, bodyOmitted: 'too-large' },
    });
  });

  it('says the row vanished when the claim found neither its insert nor a row', async () => {
    const pruned: SqlRunner = {
      query: async <R extends object>() => ({
        rows: [
          {
            xid: null,
            method: null,
            route: null,
            fingerprint: null,
            status: null,
            headers: null,
            body: null,
            body_omitted: null,
          },
        ] as unknown as R[],
        rowCount: 1,
      }),
    };
    await expect(
      keys().claim({ sql: pruned, pg: undefined, begins: false }, claimOf('pruned'), 1000),
    ).resolves.toEqual({ kind: 'vanished' });
  });

  it('fails closed on an answer that is not the claim row', async () => {
    const odd: SqlRunner = {
      query: async <R extends object>() => ({
        rows: [{ xid: 12, method: null }] as unknown as R[],
        rowCount: 1,
      }),
    };
    await expect(
      keys().claim({ sql: odd, pg: undefined, begins: false }, claimOf('odd'), 1000),
    ).rejects.toMatchObject({ code: 'EO_DATABASE' });
  });
});
