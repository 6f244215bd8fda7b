/**
 * An HTTP replay whose answer cannot be built (a stored row `new Headers` refuses) must
 * end its connection once. The replay hands its connection to a background ROLLBACK
 * (releaseLater, which closes it once the ROLLBACK returned); had it done so before the
 * answer threw, the driver would close the connection too, and on pg-pool the second
 * close releases whatever checkout holds the client by then: another request's claim
 * transaction. Now the answer is built first and a row it cannot answer from is the
 * record's failure, not a throw: the connection has one owner and one close.
 */
import { describe, expect, it } from '@jest/globals';
import type { Pool } from 'pg';
import { Engine, type Job } from '../../../src/http/engine.js';
import { resolveOptions } from '../../../src/http/options.js';
import type { KeyStatements } from '../../../src/http/store.js';
import { fakeTransactions } from '../../helpers/fake-claim-transaction.js';

describe('HTTP replay whose verdict throws', () => {
  it('ends its connection exactly once', async () => {
    const statements = {
      // A stored row replayOf cannot answer from: `new Response` refuses status 600.
      claim: async () => ({
        kind: 'stored',
        record: {
          method: 'POST',
          route: '/r',
          fingerprint: Buffer.alloc(0),
          status: 600,
          headers: {},
          body: null,
          bodyOmitted: null,
        },
      }),
      storeResponse: () => 'SELECT 1',
      forget: () => 'SELECT 1',
    } as unknown as KeyStatements;
    let releaseRollback!: () => void;
    const rollbackOut = new Promise<void>((resolve) => (releaseRollback = resolve));
    const { transactions, opened } = fakeTransactions(undefined, (conn) => {
      // The replay's ROLLBACK is still on the wire for a while.
      conn.rollback = async () => {
        conn.calls.push('rollback');
        await rollbackOut;
      };
    });
    const pool = { connect: async () => undefined } as unknown as Pool;
    const cfg = resolveOptions({ pool, scope: 'test' });
    const engine = new Engine(cfg, statements, transactions as never);
    const job: Job = {
      claim: { scope: 's', key: 'k', method: 'POST', route: '/r', fingerprint: Buffer.alloc(0) },
      keyed: true,
      request: () => new Request('http://localhost/r', { method: 'POST' }),
      body: new Uint8Array(),
      handler: async () => new Response('ok', { status: 201 }),
    };
    await engine.run(job).catch(() => undefined);
    const conn = opened[0]!;
    releaseRollback();
    await engine.drain();
    // One owner, one close.
    expect(conn.calls.filter((c) => c.startsWith('close'))).toHaveLength(1);
  });
});
