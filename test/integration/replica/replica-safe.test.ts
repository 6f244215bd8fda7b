/**
 * replicaSafe on a primary with an asynchronous streaming standby
 * (kit/services/cluster): the standby's replication link goes through a proxy that can
 * stall, so "the standby does not have it yet" is a state the test holds, not a race.
 * Each door's outward step (ack, answer, publish) must wait for the standby; with the
 * option off the same step goes out while the standby lacks the commit.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { createIdempotency } from 'effectively-once/http';
import { createConsumer } from '../../../src/index.js';
import { createRelay, migrateOutbox, enqueue } from '../../../src/outbox/index.js';
import { memorySource } from '../../../src/testing/index.js';
import {
  CommitUnknownError,
  ReplicaUnconfirmedError,
  ReplicaUnseenError,
} from '../../../src/errors.js';
import { replicaGuard } from '../../../src/replica/guard.js';
import { resolveReplicaSafe, type ReplicaSafeOptions } from '../../../src/replica/options.js';
import { parseLsn } from '../../../src/replica/waiters.js';
import { silentLogger } from '../../../src/logger.js';
import type { FailoverCluster } from '../../../kit/services/cluster/cluster.js';
import type { TestDatabase } from '../../helpers/db.js';
import { sleep, waitFor } from '../../helpers/wait-for.js';
import { startApp } from '../http/apps.js';
import { schemaOn, startCluster } from '../failover/support.js';
import { createPgBouncer, pgBouncerStop } from '../../../kit/services/pgbouncer.js';
import { freePorts } from '../../../kit/services/ports.js';
import { ATTR, METRIC } from '../../../src/otel/index.js';
import { otelHarness } from '../../helpers/otel.js';

let cluster: FailoverCluster;
let db: TestDatabase;
let standby: pg.Client;

beforeAll(async () => {
  cluster = await startCluster('async');
  db = await schemaOn(cluster.url, 'replica_safe');
  await db.pool.query(`CREATE TABLE ${db.table('effects')} (id text PRIMARY KEY)`);
  standby = new pg.Client({ connectionString: (await cluster.standbyReady()).state.url });
  await standby.connect();
}, 120_000);
afterAll(async () => {
  await standby?.end();
  await db?.close();
  await cluster?.stop();
});

function guardOf(options: ReplicaSafeOptions) {
  return replicaGuard(db.pool, resolveReplicaSafe(options), silentLogger)!;
}

async function primaryLsn(): Promise<bigint> {
  const { rows } = await db.pool.query<{ l: string }>(
    'SELECT pg_current_wal_insert_lsn()::text AS l',
  );
  return parseLsn(rows[0]!.l);
}

async function standbyFlushed(): Promise<bigint> {
  const { rows } = await standby.query<{ l: string }>(
    'SELECT pg_last_wal_receive_lsn()::text AS l',
  );
  return parseLsn(rows[0]!.l);
}

/** Whether the standby has replayed the effect row `id`. */
async function onStandby(id: string): Promise<boolean> {
  const { rows } = await standby.query(`SELECT 1 FROM ${db.table('effects')} WHERE id = $1`, [id]);
  return rows.length === 1;
}

/** Runs `fn` with the replication link stalled: the standby receives nothing meanwhile. */
async function stalled<R>(fn: () => Promise<R>): Promise<R> {
  cluster.link.stall();
  try {
    return await fn();
  } finally {
    cluster.link.unstall();
  }
}

describe('the shared waiter', () => {
  it('returns once the standby has flushed the commit', async () => {
    const guard = guardOf({});
    try {
      await guard.check();
      const ticket = guard.begin();
      await db.pool.query(`INSERT INTO ${db.table('effects')} (id) VALUES ($1)`, [randomUUID()]);
      const committed = await primaryLsn();
      expect(await guard.confirm(ticket, 'k')).toBeUndefined();
      expect(await standbyFlushed()).toBeGreaterThanOrEqual(committed);
    } finally {
      guard.close();
    }
  });

  it('holds while the standby receives nothing, and confirms once it does', async () => {
    const guard = guardOf({ maxWaitMs: 60_000 });
    try {
      await guard.check();
      let settled = false;
      const confirmed = await stalled(async () => {
        const ticket = guard.begin();
        await db.pool.query(`INSERT INTO ${db.table('effects')} (id) VALUES ($1)`, [randomUUID()]);
        const waiting = guard.confirm(ticket, 'k').then((r) => ((settled = true), r));
        await sleep(500);
        expect(settled).toBe(false);
        return { waiting };
      });
      expect(await confirmed.waiting).toBeUndefined();
    } finally {
      guard.close();
    }
  });

  it("under 'hold', a standby behind past maxWaitMs leaves the commit unconfirmed", async () => {
    const guard = guardOf({ maxWaitMs: 300 });
    const reports: string[] = [];
    guard.onReport((r) => reports.push(r.state));
    try {
      await guard.check();
      const failed = await stalled(async () => {
        const ticket = guard.begin();
        await db.pool.query(`INSERT INTO ${db.table('effects')} (id) VALUES ($1)`, [randomUUID()]);
        return guard.confirm(ticket, 'k');
      });
      expect(failed).toBeInstanceOf(CommitUnknownError);
      expect(failed?.cause).toBeInstanceOf(ReplicaUnconfirmedError);
      expect(reports).toContain('lagging');
    } finally {
      guard.close();
    }
  });

  it("under 'degrade', the same commit goes ahead on the primary's word, reported", async () => {
    const guard = guardOf({ maxWaitMs: 300, onLag: 'degrade' });
    const reports: string[] = [];
    guard.onReport((r) => reports.push(r.state));
    try {
      await guard.check();
      const result = await stalled(async () => {
        const ticket = guard.begin();
        await db.pool.query(`INSERT INTO ${db.table('effects')} (id) VALUES ($1)`, [randomUUID()]);
        return guard.confirm(ticket, 'k');
      });
      expect(result).toBeUndefined();
      expect(reports).toContain('lagging');
    } finally {
      guard.close();
    }
  });
});

describe('refused at start', () => {
  it('when no standby of that name streams', async () => {
    const guard = guardOf({ standby: { names: ['no-such-standby'] } });
    try {
      await expect(guard.check()).rejects.toBeInstanceOf(ReplicaUnseenError);
    } finally {
      guard.close();
    }
  });

  it("when synchronous_standby_names is empty for mode 'synchronous-commit'", async () => {
    const guard = guardOf({ mode: 'synchronous-commit' });
    await expect(guard.check()).rejects.toBeInstanceOf(ReplicaUnseenError);
  });

  it('when the role may not read the standby positions (no pg_monitor)', async () => {
    const role = `eo_plain_${randomUUID().slice(0, 8)}`;
    await db.pool.query(`CREATE ROLE ${role} LOGIN PASSWORD 'x'`);
    const url = new URL(cluster.url);
    url.username = role;
    url.password = 'x';
    const plain = new pg.Pool({ connectionString: url.toString(), max: 1 });
    const guard = replicaGuard(plain, resolveReplicaSafe({}), silentLogger)!;
    try {
      const error = await guard.check().then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(ReplicaUnseenError);
      expect(String((error as Error).message)).toMatch(/pg_monitor/);
    } finally {
      guard.close();
      await plain.end();
      await db.pool.query(`DROP ROLE ${role}`);
    }
  });

  it('the consumer: start() rejects', async () => {
    const consumer = createConsumer<{ id: string }>({
      name: 'refused',
      source: memorySource(),
      pool: db.pool,
      schema: db.schema,
      replicaSafe: { standby: { names: ['no-such-standby'] } },
      handler: async () => undefined,
    });
    await expect(consumer.start()).rejects.toBeInstanceOf(ReplicaUnseenError);
    await consumer.stop();
  });
});

describe('each door holds its outward step until the standby has the commit', () => {
  // `apply`: when the step goes out, the standby shows the row to a read.
  const replicaSafe: ReplicaSafeOptions = { level: 'apply', maxWaitMs: 60_000 };

  async function consumerAck(option: ReplicaSafeOptions | false) {
    const source = memorySource<{ id: string }>();
    const consumer = createConsumer<{ id: string }>({
      name: `c-${randomUUID().slice(0, 6)}`,
      source,
      pool: db.pool,
      schema: db.schema,
      replicaSafe: option,
      handler: async (body, ctx) => {
        await ctx.tx.query(`INSERT INTO ${db.table('effects')} (id) VALUES ($1)`, [body.id]);
      },
    });
    await consumer.start();
    const id = randomUUID();
    try {
      return await stalled(async () => {
        const message = source.send({ id }, { key: id });
        await waitFor(
          async () =>
            (await db.pool.query(`SELECT 1 FROM ${db.table('effects')} WHERE id = $1`, [id]))
              .rowCount === 1,
          { what: 'the commit' },
        );
        await sleep(500);
        const ackedWhileStalled = message.state === 'acked';
        return { ackedWhileStalled, message, id };
      });
    } finally {
      // (unstalled by now)
      await waitFor(() => source.outstanding === 0, { what: 'the ack', timeoutMs: 30_000 });
      await consumer.stop();
    }
  }

  it('the consumer acks only once the standby has the claim (and without the option, before)', async () => {
    const on = await consumerAck(replicaSafe);
    expect(on.ackedWhileStalled).toBe(false);
    expect(await onStandby(on.id)).toBe(true);
    const off = await consumerAck(false);
    expect(off.ackedWhileStalled).toBe(true);
  });

  it('the HTTP door answers only once the standby has the commit', async () => {
    const idempotency = createIdempotency({
      pool: db.pool,
      schema: db.schema,
      scope: 'public',
      replicaSafe,
    });
    const app = await startApp({
      framework: 'hono',
      idempotency,
      run: async (ctx) => {
        await ctx.tx.query(`INSERT INTO ${db.table('effects')} (id) VALUES ($1)`, [ctx.key]);
        return { status: 201, body: { ok: true } };
      },
    });
    const key = randomUUID();
    try {
      let answered = false;
      const response = await stalled(async () => {
        const pending = fetch(`${app.url}/run`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'idempotency-key': key },
          body: '{}',
        }).then(async (r) => ({
          status: r.status,
          standbyHasIt: await onStandby(key),
          answered: (answered = true),
        }));
        await waitFor(
          async () =>
            (await db.pool.query(`SELECT 1 FROM ${db.table('effects')} WHERE id = $1`, [key]))
              .rowCount === 1,
          { what: 'the commit' },
        );
        await sleep(500);
        expect(answered).toBe(false);
        return { pending };
      });
      expect((await response.pending).status).toBe(201);
      expect(await onStandby(key)).toBe(true);
    } finally {
      await idempotency.close();
      await app.close();
    }
  });

  it('the relay publishes only once the standby has the row', async () => {
    await migrateOutbox(db.pool, { schema: db.schema });
    const published: Array<{ id: string; standbyHasIt: boolean }> = [];
    const relay = createRelay({
      pool: db.pool,
      schema: db.schema,
      pollIntervalMs: 50,
      replicaSafe,
      publishers: {
        dest: {
          publish: async (records) => {
            for (const r of records) {
              const { rows } = await standby.query(
                `SELECT 1 FROM ${db.schema}.eo_outbox WHERE id = $1`,
                [r.id],
              );
              published.push({ id: r.id, standbyHasIt: rows.length === 1 });
            }
          },
        },
      },
    });
    await relay.start();
    try {
      await stalled(async () => {
        const client = await db.pool.connect();
        try {
          await client.query('BEGIN');
          await enqueue(client, { destination: 'dest', payload: { n: 1 } }, { schema: db.schema });
          await client.query('COMMIT');
        } finally {
          client.release();
        }
        await sleep(800);
        expect(published).toEqual([]);
      });
      await waitFor(() => published.length > 0, { what: 'the publish', timeoutMs: 30_000 });
      expect(published.every((p) => p.standbyHasIt)).toBe(true);
    } finally {
      await relay.stop();
    }
  });
});

describe('the standby in stats() and telemetry', () => {
  it("a consumer's stats() and the replica lag gauge say where the standby stands", async () => {
    const otel = otelHarness();
    const source = memorySource<{ id: string }>();
    const consumer = createConsumer<{ id: string }>({
      name: 'replica-stats',
      source,
      pool: db.pool,
      schema: db.schema,
      replicaSafe: {},
      telemetry: otel.telemetry,
      handler: async (body, ctx) => {
        await ctx.tx.query(`INSERT INTO ${db.table('effects')} (id) VALUES ($1)`, [body.id]);
      },
    });
    expect(consumer.stats().replica).toEqual({ state: undefined, lagBytes: undefined });
    await consumer.start();
    try {
      source.send({ id: randomUUID() });
      await waitFor(() => source.outstanding === 0, { what: 'the ack', timeoutMs: 30_000 });
      const { replica } = consumer.stats();
      expect(replica?.state).toBe('streaming');
      expect(replica?.lagBytes).toBeGreaterThanOrEqual(0);
      const points = await otel.points(METRIC.replicaLag);
      expect(
        points.map((p) => [p.attributes[ATTR.consumer], p.attributes[ATTR.replicaState]]),
      ).toEqual([['replica-stats', 'streaming']]);
    } finally {
      await consumer.stop();
      await otel.shutdown();
    }
  });
});

// Last in the file: it fails the cluster over, which the tests above do not expect.
describe('behind a pooler', () => {
  it('a failover the pooler hides does not confirm a commit the new primary lacks', async () => {
    // PgBouncer keeps the poller's client connection across the failover and sends the
    // next poll to whichever server the proxy reaches: the new primary, whose standby is
    // seeded from it and soon reports a position past the lost commit's.
    const [port] = await freePorts(1);
    const bouncer = await createPgBouncer(cluster.root, port!, cluster.url);
    const pooled = new pg.Pool({ connectionString: bouncer.url, max: 1 });
    // A poll in flight when the primary dies would fail and settle the wait anyway; a
    // poll a second spreads them so the failover lands between two of them.
    const guard = replicaGuard(
      pooled,
      resolveReplicaSafe({ maxWaitMs: 120_000, pollIntervalMs: 1000 }),
      silentLogger,
    )!;
    const id = randomUUID();
    try {
      await guard.check();
      cluster.link.stall(); // the standby a failover promotes never receives the commit
      const ticket = guard.begin();
      await db.pool.query(`INSERT INTO ${db.table('effects')} (id) VALUES ($1)`, [id]);
      const outcome = guard.confirm(ticket, 'k');
      await sleep(1500); // polls have assigned the wait its target on the old primary
      await cluster.failover(); // promotes the standby, unstalls the link, re-seeds
      await cluster.standbyReady();
      const { rows } = await db.pool.query(`SELECT 1 FROM ${db.table('effects')} WHERE id = $1`, [
        id,
      ]);
      expect(rows).toEqual([]); // the commit vanished with the old primary
      const failed = await outcome;
      expect(failed).toBeInstanceOf(CommitUnknownError);
      expect(failed?.cause).toBeInstanceOf(ReplicaUnconfirmedError);
    } finally {
      guard.close();
      await pooled.end();
      await pgBouncerStop(bouncer);
    }
  }, 150_000);
});
