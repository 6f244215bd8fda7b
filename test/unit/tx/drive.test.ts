/**
 * Issue 33, section 1: the claim-transaction driver (src/tx/drive.ts, conflicts.ts) that
 * the consumer's runner, its batch runner and the HTTP engine share. Run here against a
 * fake ClaimTransaction that records every call: the driver reaches the transaction only
 * through that interface, and each way the doors differ is a parameter whose test fails
 * when the parameter is ignored.
 */
import { describe, expect, it } from '@jest/globals';
import {
  DatabaseError,
  EffectivelyOnceError,
  HandlerTimeoutError,
  ShutdownError,
} from '../../../src/errors.js';
import type {
  ClaimTransaction,
  FailedAttempt,
  Released,
  WorkResult,
} from '../../../src/tx/claim-transaction.js';
import { retryConflicts, type ConflictPolicy } from '../../../src/tx/conflicts.js';
import {
  type ClaimPlan,
  type DriveStep,
  driveTransaction,
  runWork,
  type Steps,
} from '../../../src/tx/drive.js';
import {
  FakeTransaction,
  fakeTransactions,
  type FakeTx,
} from '../../helpers/fake-claim-transaction.js';

type Verdict = { kind: 'done-by-door' } | { kind: 'committed-by-door'; ms: number };

/** A plan that claims `xid` (null: the key was seen before) and runs `work`. */
function plan(
  xid: string | null,
  work: (conn: ClaimTransaction<FakeTx>) => Promise<WorkResult> = async () => ({ kind: 'ok' }),
  claim: () => Promise<string | null> = async () => xid,
): ClaimPlan<string | null, Verdict, FakeTx> & { log: string[] } {
  const log: string[] = [];
  return {
    log,
    key: 'k',
    claimWaitMs: 1234,
    claim: async (session) => {
      log.push(`claim on ${(session.sql as { fake?: string }).fake}`);
      return claim();
    },
    claimed: async (found, conn) => {
      log.push(`claimed ${String(found)}`);
      if (found === null) {
        await conn.rollback();
        return { kind: 'done', verdict: { kind: 'done-by-door' } };
      }
      return { kind: 'run', xid: found };
    },
    work: async (conn) => {
      log.push('work');
      return work(conn);
    },
    ended: async (end, _work, ms) => {
      log.push(`ended ${end.kind}`);
      return end.kind === 'committed' ? { kind: 'committed-by-door', ms } : end;
    },
  };
}

describe('driveTransaction: the sequence, through ClaimTransaction only', () => {
  it('claims on the library client, runs the work, commits by the claim’s xid, closes', async () => {
    const { transactions, opened } = fakeTransactions();
    const p = plan('42');
    const verdict = await driveTransaction(transactions, p);
    expect(verdict).toMatchObject({ kind: 'committed-by-door' });
    expect(p.log).toEqual(['claim on library client', 'claimed 42', 'work', 'ended committed']);
    expect(opened).toHaveLength(1);
    expect(opened[0]!.calls).toEqual(['untilHardStop', 'finish(ok, 42)', 'close']);
  });

  it('files a failed claim with the plan’s wait, runs nothing, closes', async () => {
    const { transactions, opened } = fakeTransactions();
    const p = plan(null, undefined, async () => {
      throw new Error('claim broke');
    });
    const verdict = await driveTransaction(transactions, p);
    expect(verdict).toMatchObject({ kind: 'failed', infrastructure: true });
    expect(p.log).toEqual(['claim on library client']);
    expect(opened[0]!.calls).toEqual(['untilHardStop', 'claimFailed(1234)', 'close']);
  });

  it('takes the door’s verdict for a key seen before, without work or COMMIT', async () => {
    const { transactions, opened } = fakeTransactions();
    const p = plan(null);
    expect(await driveTransaction(transactions, p)).toEqual({ kind: 'done-by-door' });
    expect(opened[0]!.calls).toEqual(['untilHardStop', 'rollback', 'close']);
  });

  it('does not close a transaction the door kept open (an HTTP replay’s late ROLLBACK)', async () => {
    const { transactions, opened } = fakeTransactions();
    const p: ClaimPlan<string | null, Verdict, FakeTx> = {
      ...plan('1'),
      claimed: async () => ({ kind: 'done', verdict: { kind: 'done-by-door' }, keepOpen: true }),
    };
    await driveTransaction(transactions, p);
    expect(opened[0]!.calls).not.toContain('close');
  });

  it('destroys, never releases, a transaction the library’s own code threw in', async () => {
    for (const at of ['claimed', 'work', 'ended'] as const) {
      const { transactions, opened } = fakeTransactions();
      const broke = new Error(`${at} broke`);
      const p: ClaimPlan<string | null, Verdict, FakeTx> = {
        ...plan('7'),
        [at]: async () => {
          throw broke;
        },
      };
      await expect(driveTransaction(transactions, p)).rejects.toBe(broke);
      // Released open, its claim would commit with the next checkout's work.
      expect(opened[0]!.calls.filter((c) => c.startsWith('close'))).toEqual(['close(destroy)']);
    }
  });

  it('starts nothing past the hard stop: a claim that got its row only then is rolled back', async () => {
    const stop = new AbortController();
    const { transactions, opened } = fakeTransactions(stop.signal);
    // The claim's answer comes, and the hard stop right behind it.
    const p = plan('7', undefined, async () => {
      await Promise.resolve();
      stop.abort(new ShutdownError('k'));
      return '7';
    });
    const verdict = await driveTransaction(transactions, p);
    expect(verdict).toMatchObject({ kind: 'released', error: expect.any(ShutdownError) });
    expect(p.log).not.toContain('work');
    expect(opened[0]!.calls).toEqual(['untilHardStop', 'rollback', 'close']);
  });

  it('finishes a failed work without the commit step', async () => {
    const { transactions, opened } = fakeTransactions();
    const traced: DriveStep[] = [];
    const steps: Steps = {
      step: (name, fn) => {
        traced.push(name);
        return fn();
      },
    };
    const failed = plan('9', async () => ({ kind: 'threw', error: new Error('no'), attempt: 3 }));
    await driveTransaction(transactions, failed, steps);
    expect(traced).toEqual(['transaction', 'claim', 'handler']);
    expect(opened[0]!.calls).toContain('finish(threw, 9)');
    traced.length = 0;
    await driveTransaction(transactions, plan('10'), steps);
    expect(traced).toEqual(['transaction', 'claim', 'handler', 'commit']);
  });

  it('gives up at open: what open said, nothing else', async () => {
    const refused: FailedAttempt = {
      kind: 'failed',
      error: new DatabaseError('connect', new Error('down')),
      infrastructure: true,
      conflict: false,
    };
    const p = plan('1');
    const verdict = await driveTransaction(
      { hardStop: new AbortController().signal, claimBegins: false, open: async () => refused },
      p,
    );
    expect(verdict).toBe(refused);
    expect(p.log).toEqual([]);
  });
});

describe('runWork: the user’s code and how it ended', () => {
  const options = (over: Partial<Parameters<typeof runWork>[1]> = {}) => ({
    timeoutMs: 0,
    hardStop: new AbortController().signal,
    attempt: 5,
    ...over,
  });

  it('hands the code the transaction’s tx, settles tx before `then`', async () => {
    const conn = new FakeTransaction('k', new AbortController().signal);
    let seen: FakeTx | undefined;
    const result = await runWork(
      conn,
      options(),
      async (tx) => {
        seen = tx;
        conn.calls.push('code');
        return 'answer';
      },
      async (value) => {
        conn.calls.push(`then ${value}`);
      },
    );
    expect(result).toEqual({ kind: 'ok' });
    expect(seen).toBe(conn.tx);
    expect(conn.calls).toEqual(['code', 'settleTx', 'then answer']);
  });

  it('maps a throw to threw with the given attempt', async () => {
    const conn = new FakeTransaction('k', new AbortController().signal);
    const error = new Error('handler');
    const result = await runWork(conn, options({ attempt: 4 }), async () => {
      throw error;
    });
    expect(result).toEqual({ kind: 'threw', error, attempt: 4 });
    expect(conn.calls).toEqual(['settleTx']);
  });

  it('maps the deadline to timeout, with the key and the limit', async () => {
    const conn = new FakeTransaction('key-1', new AbortController().signal);
    const result = await runWork(
      conn,
      options({ timeoutMs: 20 }),
      () => new Promise<void>(() => undefined),
    );
    expect(result.kind).toBe('timeout');
    const error = (result as { error: HandlerTimeoutError }).error;
    expect(error).toBeInstanceOf(HandlerTimeoutError);
    expect(error.details).toMatchObject({ key: 'key-1' });
  });

  it('maps the hard stop to stopped, even for code that ignores it', async () => {
    const stop = new AbortController();
    const conn = new FakeTransaction('k', stop.signal);
    const running = runWork(conn, options({ hardStop: stop.signal }), async (_tx, link) => {
      await new Promise<void>(() => undefined);
      return link;
    });
    stop.abort(new ShutdownError('k'));
    expect(await running).toEqual({ kind: 'stopped' });
  });

  it('signalParents: the code’s signal follows them (the consumer’s delivery signal)', async () => {
    const conn = new FakeTransaction('k', new AbortController().signal);
    const delivery = new AbortController();
    let aborted: unknown;
    const result = await runWork(
      conn,
      options({ signalParents: [delivery.signal] }),
      (_tx, link) =>
        new Promise<void>((resolve) => {
          link.signal.addEventListener('abort', () => {
            aborted = link.signal.reason;
            resolve();
          });
          delivery.abort('broker took it back');
        }),
    );
    expect(result).toEqual({ kind: 'ok' });
    expect(aborted).toBe('broker took it back');
  });

  it('without signalParents, another signal does not reach the code', async () => {
    const conn = new FakeTransaction('k', new AbortController().signal);
    const delivery = new AbortController();
    let signal: AbortSignal | undefined;
    await runWork(conn, options(), async (_tx, link) => {
      signal = link.signal;
      delivery.abort('elsewhere');
    });
    expect(signal?.aborted).toBe(false);
  });
});

describe('retryConflicts: the doors’ conflict policies', () => {
  const conflict = (over: Partial<FailedAttempt> = {}): FailedAttempt => ({
    kind: 'failed',
    error: new EffectivelyOnceError('EO_TEST', 'serialization failure', { retryable: true }),
    infrastructure: true,
    conflict: true,
    ...over,
  });
  const never = new AbortController().signal;

  async function losing(
    policy: ConflictPolicy,
    end: FailedAttempt = conflict(),
    hardStop = never,
  ): Promise<{ verdict: { kind: string } | FailedAttempt | Released; attempts: number[] }> {
    const attempts: number[] = [];
    const verdict = await retryConflicts<{ kind: 'ok' }>(
      async (attempt) => {
        attempts.push(attempt);
        return end;
      },
      policy,
      hardStop,
      'k',
    );
    return { verdict, attempts };
  }

  it('runs a lost race again `retries` times, numbering the runs', async () => {
    const { attempts } = await losing({ retries: 2, exhausted: 'spend-attempt' });
    expect(attempts).toEqual([1, 2, 3]);
  });

  it('returns the first end that is not a conflict', async () => {
    let n = 0;
    const verdict = await retryConflicts<{ kind: 'ok' }>(
      async () => (++n < 2 ? conflict() : { kind: 'ok' }),
      { retries: 5, exhausted: 'spend-attempt' },
      never,
      'k',
    );
    expect(verdict).toEqual({ kind: 'ok' });
    expect(n).toBe(2);
  });

  it("exhausted 'spend-attempt': the message's failure, its error kept (the consumer)", async () => {
    const end = conflict();
    const { verdict } = await losing({ retries: 1, exhausted: 'spend-attempt' }, end);
    expect(verdict).toMatchObject({ kind: 'failed', infrastructure: false, error: end.error });
  });

  it("exhausted 'spend-attempt': a race over the library's own row stays infrastructure", async () => {
    const { verdict } = await losing(
      { retries: 0, exhausted: 'spend-attempt' },
      conflict({ ownRow: true, infrastructure: false }),
    );
    expect(verdict).toMatchObject({ kind: 'failed', infrastructure: true });
  });

  it("exhausted 'infrastructure': a database failure, no attempt spent (HTTP)", async () => {
    const end = conflict({ infrastructure: false });
    const { verdict } = await losing({ retries: 1, exhausted: 'infrastructure' }, end);
    expect(verdict).toMatchObject({ kind: 'failed', infrastructure: true, conflict: false });
    const error = (verdict as FailedAttempt).error;
    expect(error).toBeInstanceOf(DatabaseError);
    expect(error.cause).toBe(end.error);
  });

  it('stopOn: once aborted, the conflict comes back as it is, not run again', async () => {
    const stop = new AbortController();
    stop.abort();
    const end = conflict();
    const { verdict, attempts } = await losing(
      { retries: 3, exhausted: 'spend-attempt', stopOn: stop.signal },
      end,
    );
    expect(attempts).toEqual([1]);
    expect(verdict).toBe(end);
  });

  it('onRetry: told before each run again', async () => {
    let retries = 0;
    await losing({ retries: 3, exhausted: 'spend-attempt', onRetry: () => retries++ });
    expect(retries).toBe(3);
  });

  it('the hard stop ends the wait between runs: released', async () => {
    const stop = new AbortController();
    stop.abort();
    const { verdict, attempts } = await losing(
      { retries: 3, exhausted: 'infrastructure' },
      conflict(),
      stop.signal,
    );
    expect(attempts).toEqual([1]);
    expect(verdict).toMatchObject({ kind: 'released', error: expect.any(ShutdownError) });
  });
});
