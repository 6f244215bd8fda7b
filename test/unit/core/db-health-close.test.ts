/**
 * The health probe of a database that went away takes a pool connection: on a pool
 * whose connections are all held elsewhere, pg queues it without bound, and close()
 * (the consumer's stop() awaits it) waited for as long as the pool stayed busy.
 */
import { describe, expect, it } from '@jest/globals';
import type { Pool } from 'pg';
import { DatabaseHealth } from '../../../src/consumer/db-health.js';
import { waitFor, within } from '../../helpers/wait-for.js';

const silent = { debug() {}, info() {}, warn() {}, error() {} };

describe('DatabaseHealth.close()', () => {
  it('ends a probe queued for a busy pool when the consumer stops', async () => {
    let connects = 0;
    // A pool whose every connection is held: connect() never settles.
    const pool = {
      connect: () => {
        connects++;
        return new Promise(() => undefined);
      },
    } as unknown as Pool;
    const stop = new AbortController();
    const health = new DatabaseHealth(pool, silent, stop.signal);
    health.markDown(new Error('connection refused'));
    await waitFor(() => connects > 0, { what: 'the probe waiting for the pool' });
    stop.abort();
    expect(await within(health.close(), 2_000)).toBeUndefined();
  });
});
