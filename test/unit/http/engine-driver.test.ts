/**
 * Issue 33, section 1: the HTTP engine on the claim-transaction driver, against a fake
 * ClaimTransaction (no database). What is the HTTP door's own around the driver: a
 * serialization race still lost after `serializationRetries` is a database failure, no
 * attempt (ConflictPolicy.exhausted 'infrastructure'); a key row that vanishes between
 * the claim and its read is claimed again, at most three times; `ctx.attempt` counts
 * every transaction the request ran.
 */
import { describe, expect, it } from '@jest/globals';
import type { Pool } from 'pg';
import { DatabaseError, EffectivelyOnceError } from '../../../src/errors.js';
import { Engine, type Job } from '../../../src/http/engine.js';
import { resolveOptions } from '../../../src/http/options.js';
import type { ClaimFound, KeyStatements } from '../../../src/http/store.js';
import type { FailedAttempt } from '../../../src/tx/claim-transaction.js';
import { fakeTransactions, type FakeTransaction } from '../../helpers/fake-claim-transaction.js';

function engine(
  found: (run: number) => ClaimFound | Error,
  configure?: (conn: FakeTransaction) => void,
): { engine: Engine; opened: FakeTransaction[] } {
  let runs = 0;
  const statements = {
    claim: async () => {
      const next = found(++runs);
      if (next instanceof Error) throw next;
      return next;
    },
    storeResponse: () => 'SELECT 1',
    forget: () => 'SELECT 1',
  } as unknown as KeyStatements;
  const { transactions, opened } = fakeTransactions(undefined, configure);
  const pool = { connect: async () => undefined } as unknown as Pool;
  const cfg = resolveOptions({ pool, scope: 'test', serializationRetries: 2 });
  return { engine: new Engine(cfg, statements, transactions as never), opened };
}

function job(attempts: number[]): Job {
  return {
    claim: { scope: 's', key: 'k', method: 'POST', route: '/r', fingerprint: Buffer.alloc(0) },
    keyed: true,
    request: () => new Request('http://localhost/r', { method: 'POST' }),
    body: new Uint8Array(),
    handler: async (ctx) => {
      attempts.push(ctx.attempt);
      return new Response('ok', { status: 201 });
    },
  };
}

describe('the HTTP engine on the driver', () => {
  it('a race lost past serializationRetries: a database failure, no attempt spent', async () => {
    const conflict: FailedAttempt = {
      kind: 'failed',
      error: new EffectivelyOnceError('EO_TEST', 'could not serialize', { retryable: true }),
      infrastructure: false,
      conflict: true,
    };
    const { engine: e, opened } = engine(
      () => new Error('40001'),
      (conn) => (conn.claimFailure = conflict),
    );
    const verdict = await e.run(job([]));
    expect(opened).toHaveLength(3);
    expect(verdict).toMatchObject({ kind: 'failed', infrastructure: true, conflict: false });
    expect((verdict as FailedAttempt).error).toBeInstanceOf(DatabaseError);
    expect((verdict as FailedAttempt).error.cause).toBe(conflict.error);
  });

  it('a key row that keeps vanishing: claimed again three times, then a database failure', async () => {
    const { engine: e, opened } = engine(() => ({ kind: 'vanished' }));
    const verdict = await e.run(job([]));
    expect(opened).toHaveLength(4);
    for (const conn of opened) expect(conn.calls).toEqual(['untilHardStop', 'rollback', 'close']);
    expect(verdict).toMatchObject({ kind: 'failed', infrastructure: true });
    expect((verdict as FailedAttempt).error).toBeInstanceOf(DatabaseError);
  });

  it('ctx.attempt counts every transaction of the request, a vanished one too', async () => {
    const attempts: number[] = [];
    const { engine: e, opened } = engine((run) =>
      run === 1 ? { kind: 'vanished' } : { kind: 'claimed', xid: '77' },
    );
    const verdict = await e.run(job(attempts));
    expect(attempts).toEqual([2]);
    expect(verdict).toMatchObject({ kind: 'executed' });
    expect(opened[1]!.calls).toEqual(['untilHardStop', 'settleTx', 'finish(ok, 77)', 'close']);
  });
});
