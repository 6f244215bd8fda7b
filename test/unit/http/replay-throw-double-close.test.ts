/**
 * Attack on the driver merge (59dc931): the HTTP replay path hands its connection to a
 * background ROLLBACK (releaseLater, which closes it once the ROLLBACK returned) and
 * only then builds the replay's verdict. Before the merge the engine set `released =
 * true` before building it, so a throw there left the connection to releaseLater alone.
 * On the driver, `keepOpen` is set only once `claimed` has returned: a throw while
 * building the verdict (replayOf's `new Response`/`new Headers` on a row it cannot
 * answer from) makes the driver close the connection at once, with the ROLLBACK still
 * on it, and releaseLater closes it a second time later. On pg-pool the second close
 * calls whatever `client.release` is by then: the next checkout's, so the client goes
 * back to the pool while another request's claim transaction runs on it.
 */
import { describe, expect, it } from '@jest/globals';
import type { Pool } from 'pg';
import { Engine, type Job } from '../../../src/http/engine.js';
import { resolveOptions } from '../../../src/http/options.js';
import type { KeyStatements } from '../../../src/http/store.js';
import { fakeTransactions } from '../../helpers/fake-claim-transaction.js';

describe('HTTP replay whose verdict throws', () => {
  it('closes its connection exactly once (releaseLater owns it)', async () => {
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
    // The ROLLBACK has not returned yet: nobody may have closed (released) the connection.
    expect(conn.calls.filter((c) => c === 'close')).toHaveLength(0);
    releaseRollback();
    await engine.drain();
    expect(conn.calls.filter((c) => c === 'close')).toHaveLength(1);
  });
});
