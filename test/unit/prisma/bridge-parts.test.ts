// The Prisma bridge's pure parts: how the door's limits become Prisma's interactive
// transaction options, how a statement chooses Prisma's raw call, and where the server's
// answer sits in what Prisma throws (shapes as @prisma/adapter-pg and @prisma/client 7 make
// them; the bridge test shows each one thrown by the real packages).
import { describe, expect, it } from '@jest/globals';
import { prismaLayer, type PrismaRawQueries } from 'effectively-once/prisma';
import {
  LONGEST_TIMER_MS,
  PRISMA_TIMEOUT_MARGIN_MS,
  prismaLimits,
} from '../../../adapters/prisma/limits.js';
import { isStatementError } from '../../../src/store/pg-errors.js';

describe('prismaLimits', () => {
  it("is never shorter than the door's limits", () => {
    expect(prismaLimits({ timeoutMs: 1_500, acquireTimeoutMs: 250 })).toEqual({
      timeout: 1_500 + PRISMA_TIMEOUT_MARGIN_MS,
      maxWait: 250,
    });
    expect(prismaLimits({ timeoutMs: 0.4, acquireTimeoutMs: 0.4 })).toEqual({
      timeout: 1 + PRISMA_TIMEOUT_MARGIN_MS,
      maxWait: 1,
    });
  });

  it("turns the door's 0 (no limit), and limits past what a Node timer keeps, into the longest timer", () => {
    expect(prismaLimits({ timeoutMs: 0, acquireTimeoutMs: 0 })).toEqual({
      timeout: LONGEST_TIMER_MS,
      maxWait: LONGEST_TIMER_MS,
    });
    expect(
      prismaLimits({ timeoutMs: LONGEST_TIMER_MS, acquireTimeoutMs: Number.POSITIVE_INFINITY }),
    ).toEqual({ timeout: LONGEST_TIMER_MS, maxWait: LONGEST_TIMER_MS });
  });
});

/** A transaction client that records which raw call each statement took. */
function recordingClient(rows: object[], affected: number) {
  const calls: Array<{ call: string; text: string; values: unknown[] }> = [];
  const client: PrismaRawQueries = {
    $queryRawUnsafe: <T>(text: string, ...values: unknown[]) => {
      calls.push({ call: 'query', text, values });
      return Promise.resolve(rows as T);
    },
    $executeRawUnsafe: (text: string, ...values: unknown[]) => {
      calls.push({ call: 'execute', text, values });
      return Promise.resolve(affected);
    },
  };
  return { client, calls };
}

const layerOf = (client: PrismaRawQueries) =>
  prismaLayer<PrismaRawQueries>({ $transaction: (fn) => fn(client) });

describe('prismaLayer: sql(tx)', () => {
  it('sends queries and RETURNING through $queryRawUnsafe: the rows, counted', async () => {
    const { client, calls } = recordingClient([{ a: 1 }, { a: 2 }], 9);
    const sql = layerOf(client).sql(client);
    for (const text of [
      'SELECT a FROM t WHERE b = $1',
      '  /* why */ -- and\n  select 1',
      'INSERT INTO t (a) VALUES ($1) RETURNING a',
      'delete from t returning a',
    ]) {
      expect(await sql.query(text, ['v'])).toEqual({ rows: [{ a: 1 }, { a: 2 }], rowCount: 2 });
    }
    expect(await sql.query('WITH x AS (SELECT 1) SELECT * FROM x')).toEqual({
      rows: [{ a: 1 }, { a: 2 }],
      rowCount: null,
    });
    expect(calls.map((c) => c.call)).toEqual(['query', 'query', 'query', 'query', 'query']);
    expect(calls[0]!.values).toEqual(['v']);
  });

  it('sends data changes without RETURNING and other statements through $executeRawUnsafe: the count', async () => {
    const { client, calls } = recordingClient([], 3);
    const sql = layerOf(client).sql(client);
    expect(await sql.query('UPDATE t SET a = $1', [1])).toEqual({ rows: [], rowCount: 3 });
    expect(await sql.query('SET TRANSACTION ISOLATION LEVEL SERIALIZABLE')).toEqual({
      rows: [],
      rowCount: 3,
    });
    expect(calls).toEqual([
      { call: 'execute', text: 'UPDATE t SET a = $1', values: [1] },
      { call: 'execute', text: 'SET TRANSACTION ISOLATION LEVEL SERIALIZABLE', values: [] },
    ]);
  });
});

describe('prismaLayer: serverError', () => {
  const layer = layerOf(recordingClient([], 0).client);
  const serverError = (error: unknown) => layer.serverError(error);

  /** adapter-pg's DriverAdapterError, as @prisma/driver-adapter-utils builds it. */
  function adapterError(cause: Record<string, unknown>): Error {
    const error = new Error(typeof cause.message === 'string' ? cause.message : String(cause.kind));
    return Object.assign(error, { name: 'DriverAdapterError', cause });
  }

  it("reads the catch-all kind's code and severity", () => {
    const error = adapterError({
      kind: 'postgres',
      originalCode: '57P01',
      originalMessage: 'terminating connection due to administrator command',
      code: '57P01',
      severity: 'FATAL',
      message: 'terminating connection due to administrator command',
    });
    expect(serverError(error)).toEqual({
      code: '57P01',
      severity: 'FATAL',
      message: 'terminating connection due to administrator command',
    });
  });

  it('reads a mapped kind inside a PrismaClientKnownRequestError, severity ERROR', () => {
    const known = Object.assign(new Error('Transaction failed due to a write conflict'), {
      name: 'PrismaClientKnownRequestError',
      code: 'P2034',
      meta: {
        driverAdapterError: adapterError({
          kind: 'TransactionWriteConflict',
          originalCode: '40001',
          originalMessage: 'could not serialize access due to concurrent update',
        }),
      },
    });
    const error = serverError(known);
    expect(error).toEqual({
      code: '40001',
      severity: 'ERROR',
      message: 'could not serialize access due to concurrent update',
    });
    expect(isStatementError(error)).toBe(true);
  });

  it('says FATAL for the mapped kinds the server sends only as FATAL (a connection being opened)', () => {
    const error = serverError(
      adapterError({ kind: 'AuthenticationFailed', originalCode: '28P01', originalMessage: 'no' }),
    );
    expect(error).toMatchObject({ code: '28P01', severity: 'FATAL' });
  });

  it('returns an error with no answer of the server inside as it is', () => {
    const closed = adapterError({ kind: 'ConnectionClosed' });
    const plain = new Error('Connection terminated unexpectedly');
    const prismaOwn = Object.assign(new Error('Transaction API error'), {
      code: 'P2028',
      meta: {},
    });
    for (const error of [closed, plain, prismaOwn, 'text', null])
      expect(serverError(error)).toBe(error);
  });

  it("passes pg's own DatabaseError through", () => {
    const pgError = Object.assign(new Error('boom'), { code: '23505', severity: 'ERROR' });
    expect(serverError(pgError)).toBe(pgError);
  });
});
