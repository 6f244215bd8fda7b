/**
 * LayerClaimTransaction over a fake data layer (no database): how the layer's
 * transaction is opened and inverted, the library's first and last statements inside
 * it, and how every end of it is filed (committed, known rollback, unknown, the
 * handler's fault, infrastructure), with a cancel on the pool for what is given up on.
 */
import { describe, expect, it } from '@jest/globals';
import {
  ClaimBusyError,
  CommitFailedError,
  CommitUnknownError,
  DatabaseError,
  HandlerError,
  HandlerTimeoutError,
  TransactionAbortedError,
  TransactionControlError,
} from '../../../src/errors.js';
import { silentLogger } from '../../../src/logger.js';
import type {
  ClaimTransaction,
  FailedAttempt,
  Released,
} from '../../../src/tx/claim-transaction.js';
import {
  LayerClaimTransaction,
  layerClaimTransactions,
  layerTimeoutMs,
  type LayerDeps,
} from '../../../src/tx/layer-transaction.js';
import {
  connectionLost,
  FakeLayer,
  type FakeLayerTx,
  FakePool,
  LayerError,
  serverError,
} from '../../helpers/fake-data-layer.js';

const XID = '777';
const CHECK = `pg_current_xact_id_if_assigned() IS NOT DISTINCT FROM '${XID}'::xid8`;

function deps(pool: FakePool, over: Partial<LayerDeps> = {}): LayerDeps & { down: unknown[] } {
  const down: unknown[] = [];
  return {
    pool: pool.asPool(),
    health: { markDown: (cause) => down.push(cause) },
    logger: silentLogger,
    acquireTimeoutMs: 200,
    hardStop: new AbortController().signal,
    isolationLevel: undefined,
    timeoutMs: 1000,
    down,
    ...over,
  };
}

async function open(
  layer: FakeLayer,
  pool = new FakePool(),
  over: Partial<LayerDeps> = {},
): Promise<LayerClaimTransaction<FakeLayerTx>> {
  const opened = await LayerClaimTransaction.open(layer, deps(pool, over), 'k');
  if (!(opened instanceof LayerClaimTransaction))
    throw new Error(`did not open: ${JSON.stringify(opened)}`);
  return opened;
}

/** Lets the layer's promise chain run (its COMMIT or ROLLBACK after the decision). */
const settle = () => new Promise((resolve) => setTimeout(resolve, 0));

describe('opening a claim transaction in a data layer', () => {
  it('hands out the layer’s tx; first statements: the isolation level, then the backend pid', async () => {
    const layer = new FakeLayer();
    const conn = await open(layer, new FakePool(), { isolationLevel: 'serializable' });
    expect(conn.tx).toEqual({ kind: 'fake-layer-tx', id: 1 });
    expect(conn.pg).toBeUndefined();
    expect(layer.log).toEqual([
      'BEGIN',
      'SET TRANSACTION ISOLATION LEVEL SERIALIZABLE',
      expect.stringContaining('SELECT pg_backend_pid()'),
    ]);
    expect(layer.settings).toEqual([{ timeoutMs: 1000, acquireTimeoutMs: 200 }]);
    conn.close();
  });

  it('says the claim finds the transaction open', () => {
    const transactions = layerClaimTransactions(new FakeLayer(), deps(new FakePool()));
    expect(transactions.claimBegins).toBe(false);
  });

  it('a layer that cannot open: infrastructure, the server error inside, the database marked down', async () => {
    const layer = new FakeLayer();
    layer.openError = Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' });
    const d = deps(new FakePool());
    const opened = (await LayerClaimTransaction.open(layer, d, 'k')) as FailedAttempt;
    expect(opened).toMatchObject({ kind: 'failed', infrastructure: true, conflict: false });
    expect(opened.error).toBeInstanceOf(DatabaseError);
    expect(opened.error.cause).toBe(layer.openError);
    expect(d.down).toEqual([layer.openError]);
  });

  it('a layer that opens nothing within acquireTimeoutMs: infrastructure; opened later, it rolls back at once', async () => {
    const layer = new FakeLayer();
    layer.neverOpens = true;
    const opened = (await LayerClaimTransaction.open(
      layer,
      deps(new FakePool(), { acquireTimeoutMs: 5 }),
      'k',
    )) as FailedAttempt;
    expect(opened).toMatchObject({ kind: 'failed', infrastructure: true });
    expect(opened.error.details).toMatchObject({ timedOut: true });
    layer.openNow();
    await settle();
    expect(layer.log).toEqual(['BEGIN', 'ROLLBACK']);
  });

  it('the hard stop before the layer opened: released', async () => {
    const layer = new FakeLayer();
    layer.neverOpens = true;
    const stop = new AbortController();
    const pending = LayerClaimTransaction.open(
      layer,
      deps(new FakePool(), { hardStop: stop.signal, acquireTimeoutMs: 10_000 }),
      'k',
    );
    stop.abort();
    expect(((await pending) as Released).kind).toBe('released');
  });

  it('a first statement that fails: rolled back, infrastructure', async () => {
    const layer = new FakeLayer((text) =>
      text.startsWith('SET TRANSACTION') ? serverError('25001') : undefined,
    );
    const opened = (await LayerClaimTransaction.open(
      layer,
      deps(new FakePool(), { isolationLevel: 'repeatable read' }),
      'k',
    )) as FailedAttempt;
    expect(opened).toMatchObject({ kind: 'failed', infrastructure: true });
    await settle();
    expect(layer.log.at(-1)).toBe('ROLLBACK');
  });
});

describe('finish: the verified COMMIT through the layer', () => {
  it('runs the xid check and the door’s statements one per call, then lets the layer commit; read back by the xid', async () => {
    const layer = new FakeLayer();
    const pool = new FakePool(['committed']);
    const conn = await open(layer, pool);
    const end = await conn.finish(
      { kind: 'ok', beforeCommit: 'UPDATE a SET b = 1; SELECT 2' },
      XID,
    );
    expect(end).toEqual({ kind: 'committed', warning: undefined });
    expect(layer.log.slice(2)).toEqual([
      expect.stringContaining(CHECK),
      'UPDATE a SET b = 1',
      ' SELECT 2',
      'COMMIT',
    ]);
    expect(pool.statements('pg_xact_status')[0]?.values).toEqual([XID]);
  });

  it('a COMMIT the layer reports done but Postgres rolled back (an aborted transaction): the handler’s fault, never committed', async () => {
    const layer = new FakeLayer();
    const conn = await open(layer, new FakePool(['aborted']));
    const end = (await conn.finish({ kind: 'ok' }, XID)) as FailedAttempt;
    expect(end).toMatchObject({ kind: 'failed', infrastructure: false });
    expect(end.error).toBeInstanceOf(TransactionAbortedError);
  });

  it('a COMMIT the layer reports done that cannot be read back: unknown, infrastructure', async () => {
    const conn = await open(new FakeLayer(), new FakePool([null]));
    const end = (await conn.finish({ kind: 'ok' }, XID)) as FailedAttempt;
    expect(end).toMatchObject({ kind: 'failed', infrastructure: true });
    expect(end.error).toBeInstanceOf(CommitUnknownError);
  });

  it.each([
    ['23514', false],
    ['23505', false],
    ['40001', true],
    ['40P01', true],
  ])(
    'an ERROR %s at COMMIT (inside the layer’s error): a known rollback, conflict %s',
    async (code, conflict) => {
      const layer = new FakeLayer();
      layer.commitError = serverError(code);
      const pool = new FakePool();
      const conn = await open(layer, pool);
      const end = (await conn.finish({ kind: 'ok' }, XID)) as FailedAttempt;
      expect(end).toMatchObject({ kind: 'failed', infrastructure: false, conflict });
      expect(end.error).toBeInstanceOf(CommitFailedError);
      expect(end.error.cause).toBe(layer.commitError);
      expect(pool.statements('pg_xact_status')).toEqual([]);
    },
  );

  it('a connection lost at COMMIT: unknown, infrastructure, never “nothing applied”', async () => {
    const layer = new FakeLayer();
    layer.commitError = connectionLost();
    const d = deps(new FakePool());
    const conn = (await LayerClaimTransaction.open(
      layer,
      d,
      'k',
    )) as LayerClaimTransaction<FakeLayerTx>;
    const end = (await conn.finish({ kind: 'ok' }, XID)) as FailedAttempt;
    expect(end).toMatchObject({ kind: 'failed', infrastructure: true });
    expect(end.error).toBeInstanceOf(CommitUnknownError);
    expect(d.down).toEqual([layer.commitError]);
  });

  it.each([
    ['committed', 'committed'],
    ['aborted', 'failed'],
  ])('a FATAL 25P03 at COMMIT is settled by the xid: %s', async (status, kind) => {
    const layer = new FakeLayer();
    layer.commitError = serverError('25P03', 'FATAL');
    const pool = new FakePool([status]);
    const conn = await open(layer, pool);
    const end = await conn.finish({ kind: 'ok' }, XID);
    expect(end.kind).toBe(kind);
    if (end.kind === 'failed') {
      expect(end.infrastructure).toBe(false);
      expect(end.error).toBeInstanceOf(TransactionAbortedError);
    }
    expect(pool.statements('pg_xact_status')).toHaveLength(1);
  });

  it('the xid check finds another transaction (the handler committed): committed, with a warning', async () => {
    const layer = new FakeLayer((text) =>
      text.includes(CHECK) ? serverError('42704') : undefined,
    );
    const conn = await open(layer, new FakePool(['committed']));
    const end = await conn.finish({ kind: 'ok', beforeCommit: 'SELECT 1' }, XID);
    expect(end.kind).toBe('committed');
    expect((end as { warning: unknown }).warning).toBeInstanceOf(TransactionControlError);
    await settle();
    // The door's statement never ran; the layer rolled back what runs now.
    expect(layer.log.slice(3)).toEqual(['ROLLBACK']);
  });

  it('the xid check finds the claim’s transaction rolled back by the handler: its fault', async () => {
    const layer = new FakeLayer((text) =>
      text.includes(CHECK) ? serverError('42704') : undefined,
    );
    const conn = await open(layer, new FakePool(['aborted']));
    const end = (await conn.finish({ kind: 'ok' }, XID)) as FailedAttempt;
    expect(end).toMatchObject({ kind: 'failed', infrastructure: false });
    expect(end.error).toBeInstanceOf(TransactionAbortedError);
  });

  it('the xid check meets an aborted transaction (25P02): rolled back, the handler’s fault', async () => {
    const layer = new FakeLayer((text) =>
      text.includes(CHECK) ? serverError('25P02') : undefined,
    );
    const conn = await open(layer);
    const end = (await conn.finish({ kind: 'ok' }, XID)) as FailedAttempt;
    expect(end).toMatchObject({ kind: 'failed', infrastructure: false, conflict: false });
    expect(end.error).toBeInstanceOf(TransactionAbortedError);
    await settle();
    expect(layer.log.at(-1)).toBe('ROLLBACK');
    expect(layer.log).not.toContain('COMMIT');
  });

  it('the connection lost before COMMIT was let through: known not committed, infrastructure', async () => {
    const layer = new FakeLayer((text) =>
      text.includes(CHECK) || text === 'SELECT 1' ? connectionLost() : undefined,
    );
    const conn = await open(layer);
    const end = (await conn.finish({ kind: 'ok' }, XID)) as FailedAttempt;
    expect(end).toMatchObject({ kind: 'failed', infrastructure: true });
    expect(end.error).toBeInstanceOf(DatabaseError);
    expect(end.error).not.toBeInstanceOf(CommitUnknownError);
    await settle();
    expect(layer.log).not.toContain('COMMIT');
  });

  it('a door statement the server refuses: a known rollback (CommitFailedError)', async () => {
    const layer = new FakeLayer((text) => (text === 'INSERT x' ? serverError('23505') : undefined));
    const conn = await open(layer);
    const end = (await conn.finish({ kind: 'ok', beforeCommit: 'INSERT x' }, XID)) as FailedAttempt;
    expect(end).toMatchObject({ kind: 'failed', infrastructure: false, conflict: false });
    expect(end.error).toBeInstanceOf(CommitFailedError);
  });

  it('the hard stop before COMMIT: rolled back, released', async () => {
    const stop = new AbortController();
    const layer = new FakeLayer();
    const conn = await open(layer, new FakePool(), { hardStop: stop.signal });
    stop.abort();
    const end = await conn.finish({ kind: 'ok' }, XID);
    expect(end.kind).toBe('released');
    await settle();
    expect(layer.log).not.toContain('COMMIT');
  });
});

describe('what is given up on has its backend ended, then is rolled back through the layer', () => {
  it('a handler timeout: pg_terminate_backend on the pool for this backend in this transaction, the layer rolls back', async () => {
    const layer = new FakeLayer();
    const pool = new FakePool();
    const conn = await open(layer, pool);
    const error = new HandlerTimeoutError('k', 5);
    const end = (await conn.finish({ kind: 'timeout', error }, XID)) as FailedAttempt;
    expect(end).toMatchObject({ kind: 'failed', infrastructure: false, error });
    await settle();
    const cancels = pool.statements('pg_terminate_backend');
    expect(cancels).toHaveLength(1);
    expect(cancels[0]?.values).toEqual([4242, '170000000001']);
    expect(layer.log.at(-1)).toBe('ROLLBACK');
    expect(layer.settled.at(-1)).toMatchObject({ kind: 'rejected' });
  });

  it('a handler timeout: the layer rolls back only once the backend is gone', async () => {
    // Rolled back first, the layer would return a live connection to its pool, and the
    // abandoned handler's next statement through ctx.tx would run outside the claim.
    const layer = new FakeLayer();
    const pool = new FakePool();
    let answer!: () => void;
    pool.terminated = new Promise<void>((resolve) => (answer = resolve));
    const conn = await open(layer, pool);
    await conn.finish({ kind: 'timeout', error: new HandlerTimeoutError('k', 5) }, XID);
    conn.close();
    await settle();
    expect(pool.statements('pg_terminate_backend')).toHaveLength(1);
    expect(layer.log).not.toContain('ROLLBACK');
    answer();
    await settle();
    expect(layer.log.at(-1)).toBe('ROLLBACK');
  });

  it('stopped while running: backend ended, rolled back, released', async () => {
    const layer = new FakeLayer();
    const pool = new FakePool();
    const conn = await open(layer, pool);
    expect((await conn.finish({ kind: 'stopped' }, XID)).kind).toBe('released');
    await settle();
    expect(pool.statements('pg_terminate_backend')).toHaveLength(1);
    expect(layer.log.at(-1)).toBe('ROLLBACK');
  });

  it('untilHardStop: the stop gives the statement up, ends its backend and rolls back', async () => {
    const stop = new AbortController();
    const layer = new FakeLayer();
    const pool = new FakePool();
    const conn = await open(layer, pool, { hardStop: stop.signal });
    const never = new Promise<number>(() => undefined);
    const answer = conn.untilHardStop(never);
    stop.abort();
    expect(await answer).toBeUndefined();
    await settle();
    expect(pool.statements('pg_terminate_backend')).toHaveLength(1);
    expect(layer.log.at(-1)).toBe('ROLLBACK');
  });

  it('close after a throw of the library’s own: backend ended and rolled back; nothing more runs in it', async () => {
    const layer = new FakeLayer();
    const pool = new FakePool();
    const conn = await open(layer, pool);
    conn.close(new Error('telemetry hook threw'));
    conn.close(new Error('twice'));
    await settle();
    expect(pool.statements('pg_terminate_backend')).toHaveLength(1);
    expect(layer.log.at(-1)).toBe('ROLLBACK');
    await expect(conn.client.query('SELECT 1')).rejects.toBeInstanceOf(TransactionControlError);
  });

  it('close with nothing decided rolls back, without ending the backend', async () => {
    const layer = new FakeLayer();
    const pool = new FakePool();
    const conn = await open(layer, pool);
    conn.close();
    await settle();
    expect(pool.statements('pg_terminate_backend')).toEqual([]);
    expect(layer.log.at(-1)).toBe('ROLLBACK');
  });
});

describe('a failed handler, a failed claim', () => {
  it('a handler error on a live connection: its fault, rolled back', async () => {
    const layer = new FakeLayer();
    const conn = await open(layer);
    const thrown = new Error('boom');
    const end = (await conn.finish(
      { kind: 'threw', error: thrown, attempt: 2 },
      XID,
    )) as FailedAttempt;
    expect(end).toMatchObject({ kind: 'failed', infrastructure: false, conflict: false });
    expect(end.error).toBeInstanceOf(HandlerError);
    expect(layer.log.at(-1)).toBe('ROLLBACK');
  });

  it('a serialization failure inside the layer’s error: a conflict, run again in place', async () => {
    const conn = await open(new FakeLayer());
    const thrown = new LayerError('prisma says', serverError('40001'));
    const end = (await conn.finish(
      { kind: 'threw', error: thrown, attempt: 1 },
      XID,
    )) as FailedAttempt;
    expect(end).toMatchObject({ kind: 'failed', infrastructure: false, conflict: true });
  });

  it('a handler error because the connection died: infrastructure, no attempt spent', async () => {
    const layer = new FakeLayer((text) => (text === 'SELECT 1' ? connectionLost() : undefined));
    const conn = await open(layer);
    const thrown = new LayerError('closed', connectionLost());
    const end = (await conn.finish(
      { kind: 'threw', error: thrown, attempt: 1 },
      XID,
    )) as FailedAttempt;
    expect(end).toMatchObject({ kind: 'failed', infrastructure: true });
  });

  it('a terminated backend (FATAL 57P01) under the handler: infrastructure', async () => {
    const conn = await open(new FakeLayer());
    const thrown = new LayerError('terminated', serverError('57P01', 'FATAL'));
    const end = (await conn.finish(
      { kind: 'threw', error: thrown, attempt: 1 },
      XID,
    )) as FailedAttempt;
    expect(end).toMatchObject({ kind: 'failed', infrastructure: true });
  });

  it('a claim that waited past lock_timeout: busy, rolled back', async () => {
    const layer = new FakeLayer();
    const conn: ClaimTransaction<FakeLayerTx> = await open(layer);
    const failed = await conn.claimFailed(new LayerError('locked', serverError('55P03')), 50);
    expect(failed.error).toBeInstanceOf(ClaimBusyError);
    expect(failed.infrastructure).toBe(true);
    expect(layer.log.at(-1)).toBe('ROLLBACK');
  });
});

describe('the layer’s own transaction limit', () => {
  it('is never shorter than what the library lets run inside it', () => {
    expect(layerTimeoutMs(60_000, 5000)).toBeGreaterThan(65_000);
    expect(layerTimeoutMs(0, 5000)).toBe(0);
  });
});
