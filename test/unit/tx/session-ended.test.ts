/**
 * Issue 32, defect 3: how ClaimConnection files a session the server ended under the
 * handler. A FATAL 25P03 (idle_in_transaction_session_timeout) or 25P04
 * (transaction_timeout, Postgres 17+) arrives before the server closes the socket: the
 * transaction's own idleness or length ended it, so it is the message's failure. Any
 * other end (57P01 pg_terminate_backend, a dropped socket) is infrastructure.
 */
import { EventEmitter } from 'node:events';
import { describe, expect, it } from '@jest/globals';
import type { Pool } from 'pg';
import { ClaimConnection } from '../../../src/tx/claim-connection.js';
import type { WorkResult } from '../../../src/tx/claim-transaction.js';

/** A FATAL ErrorResponse as pg hands it over. */
function fatal(code: string, message: string): Error {
  return Object.assign(new Error(message), { code, severity: 'FATAL' });
}

class FakeClient extends EventEmitter {
  readonly released: unknown[] = [];
  async query(): Promise<never> {
    throw new Error('Client has encountered a connection error and is not queryable');
  }
  release(error?: unknown): void {
    this.released.push(error);
  }
}

async function open(client: FakeClient): Promise<{ conn: ClaimConnection; down: unknown[] }> {
  const down: unknown[] = [];
  const pool = { connect: async () => client, idleCount: 1, waitingCount: 0 };
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
  return { conn, down };
}

/** The server's FATAL, then the socket's close, as pg reports them on an idle client. */
function endSession(client: FakeClient, first: Error | undefined): void {
  if (first !== undefined) client.emit('error', first);
  client.emit('error', new Error('Connection terminated unexpectedly'));
}

const timeouts: Array<[string, Error]> = [
  ['25P03', fatal('25P03', 'terminating connection due to idle-in-transaction timeout')],
  ['25P04', fatal('25P04', 'terminating connection due to transaction timeout')],
];
const outages: Array<[string, Error | undefined]> = [
  ['57P01', fatal('57P01', 'terminating connection due to administrator command')],
  ['a dropped socket', undefined],
];
const works: Array<[string, WorkResult]> = [
  ['the handler returned', { kind: 'ok' }],
  ['the handler threw', { kind: 'threw', error: new Error('not queryable'), attempt: 1 }],
  ['the adapter hook failed', { kind: 'hook-failed', error: new Error('not queryable') }],
];

describe('a session the server ended under the handler', () => {
  describe.each(works)('%s', (_what, work) => {
    it.each(timeouts)(
      '%s: the message’s failure, the database not marked down',
      async (code, error) => {
        const client = new FakeClient();
        const { conn, down } = await open(client);
        endSession(client, error);
        const end = await conn.finish(work, '1');
        conn.close();
        expect(end).toMatchObject({ kind: 'failed', infrastructure: false, conflict: false });
        expect(JSON.stringify((end as { error: { details: unknown } }).error.details)).toContain(
          code,
        );
        expect(down).toEqual([]);
        expect(client.released[0]).toBeInstanceOf(Error);
      },
    );

    it.each(outages)('%s: infrastructure', async (_code, error) => {
      const client = new FakeClient();
      const { conn } = await open(client);
      endSession(client, error);
      const end = await conn.finish(work, '1');
      conn.close();
      expect(end).toMatchObject({ kind: 'failed', infrastructure: true });
    });
  });

  it('25P04 while a handler statement ran: the statement got the FATAL, the close came after', async () => {
    const client = new FakeClient();
    const { conn, down } = await open(client);
    const error = fatal('25P04', 'terminating connection due to transaction timeout');
    endSession(client, undefined);
    const end = await conn.finish({ kind: 'threw', error, attempt: 1 }, '1');
    conn.close();
    expect(end).toMatchObject({ kind: 'failed', infrastructure: false, conflict: false });
    expect(down).toEqual([]);
  });
});
