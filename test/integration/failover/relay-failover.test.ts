/**
 * The outbox relay through a failover (kit/services/cluster/cluster.ts): the primary dies,
 * the proxy points at the standby while it is still read-only (the relay's claims and
 * its LISTEN get SQLSTATE 25006 there), then at the promoted standby. The relay backs
 * off meanwhile instead of spinning, its LISTEN connection is established again on
 * the new primary, and no wake-up is lost: a row committed during the switch (before
 * the LISTEN is back) and one committed after it are both published within seconds,
 * with polling set to a day so no poll can be what found them.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  createRelay,
  httpPublisher,
  migrateOutbox,
  type Relay,
  type RelayEvents,
} from 'effectively-once/outbox';
import { sqlstateOf } from '../../../src/store/pg-errors.js';
import type { FailoverCluster } from '../../../kit/services/cluster/cluster.js';
import type { TestDatabase } from '../../helpers/db.js';
import { sleep, waitFor } from '../../helpers/wait-for.js';
import { enqueueCommitted, Receiver } from '../outbox/support.js';
import { schemaOn, startCluster } from './support.js';

let cluster: FailoverCluster;
let db: TestDatabase;
let receiver: Receiver;
let relay: Relay | undefined;

beforeAll(async () => {
  cluster = await startCluster('sync');
  db = await schemaOn(cluster.url, 'relay_failover');
  await migrateOutbox(db.pool, { schema: db.schema });
  receiver = new Receiver();
  await receiver.start();
});
afterAll(async () => {
  await relay?.stop();
  await receiver.close();
  await db.close();
  await cluster.stop();
});

/** Backends LISTENing on the node the proxy points at. */
async function listening(): Promise<number> {
  const { rows } = await db.pool.query<{ n: number }>(
    "SELECT count(*)::int AS n FROM pg_stat_activity WHERE query LIKE 'LISTEN %' AND pid <> pg_backend_pid()",
  );
  return rows[0]?.n ?? 0;
}

/** The SQLSTATE somewhere in an error's causes. */
function codeOf(error: unknown): string | undefined {
  for (let e = error, depth = 0; e && depth < 5; depth++) {
    const code = sqlstateOf(e);
    if (code !== undefined) return code;
    e = (e as { cause?: unknown }).cause;
  }
  return undefined;
}

const publish = (n: number) =>
  enqueueCommitted(db.pool, [{ destination: 'effects', payload: { k: 'f', n } }], db.schema);

describe('the outbox relay through a failover', () => {
  it('backs off on the read-only standby, LISTENs again on the new primary, loses no wake-up', async () => {
    const errors: Array<RelayEvents['error']> = [];
    relay = createRelay({
      pool: db.pool,
      schema: db.schema,
      publishers: { effects: httpPublisher({ url: receiver.url, fetch: { attempts: 1 } }) },
      pollIntervalMs: 86_400_000,
    });
    relay.on('error', (e) => errors.push(e));
    await relay.start();
    await waitFor(async () => (await listening()) === 1, { what: 'the LISTEN connection' });
    await publish(0);
    await waitFor(() => receiver.accepted.length === 1, { what: 'row 0 published (NOTIFY)' });

    // The primary dies; the proxy points at the standby, still read-only, for 2 s.
    const standby = await cluster.standbyReady();
    await cluster.crashPrimary('kill');
    cluster.proxy.retarget(standby.state.port);
    await sleep(2000);
    const readOnly = errors.splice(0);
    // It met the read-only node, and backed off rather than spinning on it.
    expect(readOnly.map(codeOf)).toContain('25006');
    expect(readOnly.length).toBeLessThanOrEqual(20);

    await cluster.promoteStandby();
    // Committed on the new primary at once: before the relay's LISTEN is back, most likely.
    const started = Date.now();
    await publish(1);
    await waitFor(() => receiver.accepted.length === 2, {
      what: 'row 1, committed during the switch, published',
      timeoutMs: 12_000,
    });
    const switchMs = Date.now() - started;

    // The LISTEN connection is on the new primary, and a NOTIFY wakes the idle relay.
    await waitFor(async () => (await listening()) === 1, {
      what: 'the LISTEN connection on the new primary',
      timeoutMs: 15_000,
    });
    await sleep(200);
    const idle = Date.now();
    await publish(2);
    await waitFor(() => receiver.accepted.length === 3, {
      what: 'row 2 published (NOTIFY on the new primary)',
      timeoutMs: 5000,
    });
    expect(receiver.acceptedOf('f')).toEqual([0, 1, 2]);
    // Each row once: no publish was repeated across the switch.
    expect(new Set(receiver.accepted.map((r) => r.key)).size).toBe(3);
    expect(switchMs).toBeLessThan(12_000);
    expect(Date.now() - idle).toBeLessThan(5000);
  }, 120_000);
});
