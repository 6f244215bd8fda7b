/**
 * A COMMIT whose answer is the FATAL of the server ending the session for the
 * transaction's own timeout (25P03, 25P04) is settled by the claim's xid, asked with
 * `pg_xact_status` on another connection of the pool: aborted is the message's failure
 * (an attempt spent), committed is committed, anything else stays unknown. A COMMIT
 * lost with a plain dropped connection is not asked about (the pool may reach another
 * server by then): unknown, as before.
 */
import { EventEmitter } from 'node:events';
import { describe, expect, it } from '@jest/globals';
import type { Pool } from 'pg';
import { ClaimConnection } from '../../../src/tx/claim-connection.js';
import type { TransactionEnd } from '../../../src/tx/claim-transaction.js';

function fatal(code: string, message: string): Error {
  return Object.assign(new Error(message), { code, severity: 'FATAL' });
}

/** The claim's connection: the COMMIT round trip gets `answer` as its error. */
class ClaimClient extends EventEmitter {
  readonly released: unknown[] = [];
  constructor(private readonly answer: Error) {
    super();
  }
  async query(): Promise<never> {
    throw this.answer;
  }
  release(error?: unknown): void {
    this.released.push(error);
  }
}

/** The other connection: answers pg_xact_status from `statuses`, one per query. */
class CheckClient {
  readonly asked: unknown[][] = [];
  readonly released: unknown[] = [];
  constructor(private readonly statuses: Array<string | null | Error>) {}
  async query(sql: string, params: unknown[]): Promise<{ rows: Array<{ status: string | null }> }> {
    this.asked.push([sql, ...params]);
    const next = this.statuses.length > 1 ? this.statuses.shift()! : this.statuses[0]!;
    if (next instanceof Error) throw next;
    return { rows: [{ status: next }] };
  }
  release(error?: unknown): void {
    this.released.push(error);
  }
}

async function commitWith(
  answer: Error,
  statuses: Array<string | null | Error>,
): Promise<{ end: TransactionEnd; check: CheckClient; down: unknown[] }> {
  const claim = new ClaimClient(answer);
  const check = new CheckClient(statuses);
  const clients: unknown[] = [claim, check];
  const down: unknown[] = [];
  const pool = { connect: async () => clients.shift(), idleCount: 1, waitingCount: 0 };
  const conn = await ClaimConnection.open(
    {
      pool: pool as unknown as Pool,
      health: { markDown: (cause) => down.push(cause) },
      logger: { warn: () => undefined } as never,
      acquireTimeoutMs: 1000,
      hardStop: new AbortController().signal,
    },
    'k',
  );
  if (!(conn instanceof ClaimConnection)) throw new Error('not opened');
  const end = await conn.finish({ kind: 'ok' }, '1234');
  conn.close();
  // The claim's session is gone: its client is destroyed, never reused.
  expect(claim.released[0]).toBeInstanceOf(Error);
  return { end, check, down };
}

const timeouts: Array<[string, Error]> = [
  ['25P03', fatal('25P03', 'terminating connection due to idle-in-transaction timeout')],
  ['25P04', fatal('25P04', 'terminating connection due to transaction timeout')],
];

describe.each(timeouts)('COMMIT answered by FATAL %s', (code, answer) => {
  it('aborted (after "in progress" while the backend exits): the message’s failure', async () => {
    const { end, check, down } = await commitWith(answer, ['in progress', 'aborted']);
    expect(end).toMatchObject({
      kind: 'failed',
      infrastructure: false,
      conflict: false,
      error: { code: 'EO_TX_ABORTED' },
    });
    expect(JSON.stringify((end as { error: { details: unknown } }).error.details)).toContain(code);
    expect(check.asked).toEqual([
      ['SELECT pg_xact_status($1::xid8) AS status', '1234'],
      ['SELECT pg_xact_status($1::xid8) AS status', '1234'],
    ]);
    expect(check.released).toEqual([undefined]);
    expect(down).toEqual([]);
  });

  it('committed: committed (acked, or the stored answer sent)', async () => {
    const { end } = await commitWith(answer, ['committed']);
    expect(end).toEqual({ kind: 'committed', warning: undefined });
  });

  it.each([
    ['a status the server no longer keeps (NULL)', null],
    ['the check failing', Object.assign(new Error('boom'), { code: '57P01', severity: 'FATAL' })],
  ])('%s: still unknown', async (_what, status) => {
    const { end, check } = await commitWith(answer, [status]);
    expect(end).toMatchObject({
      kind: 'failed',
      infrastructure: true,
      error: { code: 'EO_COMMIT_UNKNOWN' },
    });
    if (status instanceof Error) expect(check.released).toEqual([status]);
  });
});

describe('COMMIT lost with a connection ended another way', () => {
  it.each([
    ['57P01', fatal('57P01', 'terminating connection due to administrator command')],
    ['a dropped socket', new Error('Connection terminated unexpectedly')],
  ])('%s: unknown, not asked about', async (_what, answer) => {
    const { end, check } = await commitWith(answer, ['aborted']);
    expect(end).toMatchObject({
      kind: 'failed',
      infrastructure: true,
      error: { code: 'EO_COMMIT_UNKNOWN' },
    });
    expect(check.asked).toEqual([]);
  });
});
