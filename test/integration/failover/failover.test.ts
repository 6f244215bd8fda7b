/**
 * A primary with a synchronous standby (kit/services/cluster/cluster.ts), the consumer
 * reaching it through the proxy that a failover moves to the promoted standby. The
 * connection is lost at the worst moments: a switchover (fast shutdown: the backend
 * sends FATAL 57P01) while the handler holds the claim, and the primary dying with a
 * COMMIT in flight (the client sees its connection end, 08006 in libpq's terms), once
 * after the old primary committed and answered (the proxy withholds the answer), once
 * before it could. Each time: no attempt spent (maxAttempts is 1), deliveries pause
 * until the new primary takes writes, and the message ends applied exactly once.
 *
 * Then what replication gives the claim when the primary dies with its standby behind
 * (the replication link stalled), the one sequence under both modes. Synchronous:
 * COMMIT is not acknowledged until the standby has it, so the message is not acked,
 * and the redelivery applies it once. Asynchronous: the message is acked at once, and
 * its claim and effect vanish with the old primary: lost. That is the window
 * docs/failure-semantics.md ("Postgres failover") tells users to close.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { FailoverCluster } from '../../../kit/services/cluster/cluster.js';
import { query, type PgNode, type Replication } from '../../../kit/services/cluster/node.js';
import { migrate, type Consumer, type ConsumerEvents } from '../../../src/index.js';
import { sqlstateOf } from '../../../src/store/pg-errors.js';
import type { TestDatabase } from '../../helpers/db.js';
import { memoryHarness, type MemoryHarness } from '../../helpers/memory-harness.js';
import { sleep, waitFor } from '../../helpers/wait-for.js';
import { recordingLogger, schemaOn, startCluster } from './support.js';

let cluster: FailoverCluster;
const opened: Array<{ db: TestDatabase; consumer: Consumer }> = [];

beforeAll(async () => {
  cluster = await startCluster('sync');
});
afterAll(async () => {
  for (const { db, consumer } of opened) {
    await consumer.stop({ timeoutMs: 1000 });
    await db.close();
  }
  await cluster.stop();
});

/** A consumer on a fresh schema through the proxy, one attempt allowed, its failures recorded. */
async function consumerOn(name: string, options: Parameters<typeof memoryHarness>[1] = {}) {
  const db = await schemaOn(cluster.url, name);
  await migrate(db.pool, { schema: db.schema });
  const logger = recordingLogger();
  const h: MemoryHarness = await memoryHarness(db, {
    maxAttempts: 1,
    migrate: false,
    logger,
    ...options,
  });
  opened.push({ db, consumer: h.consumer });
  const failures: Array<ConsumerEvents['failed']> = [];
  h.consumer.on('failed', (e) => failures.push(e));
  return { h, logger, failures };
}

describe('failover under a running consumer', () => {
  it('a switchover (57P01) while the handler holds the claim: retried without an attempt, applied once on the new primary', async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let holding = false;
    const { h, logger, failures } = await consumerOn('switchover', {
      after: async (_m, ctx) => {
        if (ctx.attempt > 1) return;
        holding = true;
        await gate;
      },
    });
    const message = h.source.send({ id: 's', amount: 1 }, { key: 's' });
    await h.consumer.start();
    await waitFor(() => holding, { what: 'the handler holding the claim' });
    await cluster.crashPrimary('stop');
    await waitFor(() => logger.lines.find((l) => l.code === '57P01'), {
      what: 'the claim connection ended by 57P01',
    });
    release();
    await waitFor(() => logger.said('pausing deliveries'), { what: 'the consumer pausing' });
    await cluster.promoteStandby();
    await waitFor(() => message.state === 'acked', { what: 'acked', timeoutMs: 30_000 });
    await h.consumer.stop();
    expect(message.outcomes).toEqual(['retry', 'processed']);
    expect(failures.map((f) => [f.error.code, f.willRetry])).toEqual([['EO_DATABASE', true]]);
    expect(await h.effects()).toEqual([{ id: 's', amount: 1 }]);
  });

  it('the primary dies after answering COMMIT, the answer lost: EO_COMMIT_UNKNOWN; the new primary has it committed; the redelivery is a duplicate', async () => {
    const { h, logger, failures } = await consumerOn('commit_answered');
    const failover = cluster.failover({ arm: 'answered', armWaitMs: 20_000 });
    await waitFor(() => cluster.proxy.armed, { what: 'the proxy armed' });
    const message = h.source.send({ id: 'a', amount: 2 }, { key: 'a' });
    await h.consumer.start();
    const report = await failover;
    expect(report.caught).toMatchObject({ arm: 'answered', tag: 'COMMIT' });
    // Synchronous replication: what the old primary acknowledged, the new one has.
    expect(report.unknown).toContainEqual({ xid: report.caught?.xid, status: 'committed' });
    await waitFor(() => message.state === 'acked', { what: 'acked', timeoutMs: 30_000 });
    await h.consumer.stop();
    expect(message.outcomes).toEqual(['retry', 'duplicate']);
    expect(failures.map((f) => [f.error.code, f.willRetry])).toEqual([['EO_COMMIT_UNKNOWN', true]]);
    expect(logger.said('pausing deliveries')).toBe(true);
    expect(await h.effects()).toEqual([{ id: 'a', amount: 2 }]);
  });

  it('the primary dies with COMMIT sent and the standby behind: EO_COMMIT_UNKNOWN; never committed on the new primary; the redelivery applies it once', async () => {
    const { h, failures } = await consumerOn('commit_sent');
    // The replication link stalls first: the COMMIT cannot be acknowledged (sync) nor reach the standby.
    const failover = cluster.failover({ arm: 'sent', armWaitMs: 20_000, stallMs: 0 });
    await waitFor(() => cluster.proxy.armed, { what: 'the proxy armed' });
    const message = h.source.send({ id: 'n', amount: 3 }, { key: 'n' });
    await h.consumer.start();
    const report = await failover;
    expect(report.caught).toMatchObject({ arm: 'sent' });
    const status = report.unknown.find((u) => u.xid === report.caught?.xid)?.status;
    expect(['aborted', 'never replicated']).toContain(status);
    await waitFor(() => message.state === 'acked', { what: 'acked', timeoutMs: 30_000 });
    await h.consumer.stop();
    expect(message.outcomes).toEqual(['retry', 'processed']);
    expect(failures.map((f) => [f.error.code, f.willRetry])).toEqual([['EO_COMMIT_UNKNOWN', true]]);
    expect(sqlstateOf(failures[0]?.error.cause)).toBeUndefined();
    expect(await h.effects()).toEqual([{ id: 'n', amount: 3 }]);
  });
});

/** One message handled while the standby is cut off; then the primary dies and the standby takes over. */
async function primaryDiesWithStandbyBehind(replication: Replication) {
  await cluster.setReplication(replication);
  const { h } = await consumerOn(`window_${replication}`, { maxAttempts: 3 });
  await h.consumer.start();
  const standby = await cluster.standbyReady();
  // Under async the schema just made may not have reached the standby yet: the stall
  // must cut off only the message, or the new primary lacks the tables too.
  await caughtUp(cluster.primary, standby);
  cluster.link.stall();
  const message = h.source.send({ id: 'w', amount: 1 }, { key: 'w' });
  // Acked (async), or stuck in COMMIT waiting for the standby (sync): either way, by now.
  await sleep(1500);
  const stateAtDeath = message.state;
  await cluster.crashPrimary('kill');
  await cluster.promoteStandby();
  expect(cluster.primary.name).toBe(standby.name);
  return { h, message, stateAtDeath };
}

/** Waits until `standby` has replayed everything `primary` has written so far. */
async function caughtUp(primary: PgNode, standby: PgNode): Promise<void> {
  const [row] = await query<{ lsn: string }>(primary, 'SELECT pg_current_wal_lsn()::text AS lsn');
  const lsn = row?.lsn;
  await waitFor(
    async () =>
      (
        await query<{ done: boolean }>(
          standby,
          'SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn AS done',
          [lsn],
        )
      )[0]?.done === true,
    { what: 'the standby caught up', timeoutMs: 30_000 },
  );
}

describe('the primary dies with its standby behind', () => {
  it('synchronous: COMMIT waits for the standby, so nothing is acked early; the redelivery applies it once', async () => {
    const { h, message, stateAtDeath } = await primaryDiesWithStandbyBehind('sync');
    expect(stateAtDeath).toBe('in-flight');
    await waitFor(() => message.state === 'acked', { what: 'acked', timeoutMs: 30_000 });
    expect(message.outcomes).toEqual(['retry', 'processed']);
    expect(await h.effects()).toEqual([{ id: 'w', amount: 1 }]);
  });

  it('asynchronous: the message was acked, and its claim and effect vanished with the old primary', async () => {
    const { h, message, stateAtDeath } = await primaryDiesWithStandbyBehind('async');
    expect(stateAtDeath).toBe('acked');
    expect(message.outcomes).toEqual(['processed']);
    expect(await h.effects()).toEqual([]);
  });
});
