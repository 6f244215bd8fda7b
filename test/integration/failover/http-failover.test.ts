/**
 * The HTTP door when the primary dies with a request's COMMIT in flight, on a primary
 * with a synchronous standby (kit/services/cluster/cluster.ts). The server cannot know how the
 * COMMIT ended: it answers 503 `outcome-unknown` with `Retry-After`, never 500 and never
 * the handler's 201. The caller's retry with the same key, on the promoted standby,
 * settles it: a replay of the stored 201 when the old primary had answered COMMIT (the
 * answer withheld by the proxy: synchronous replication put it on the standby first),
 * the handler run afresh when the COMMIT was only sent (the standby's link stalled, so it
 * was never acknowledged). Either way one charge.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { FailoverCluster } from '../../../kit/services/cluster/cluster.js';
import type { CommitArm } from '../../../kit/services/cluster/pg-proxy.js';
import { createIdempotency, type Idempotency } from '../../../src/http/index.js';
import type { TestDatabase } from '../../helpers/db.js';
import { schemaOn, startCluster } from './support.js';

let cluster: FailoverCluster;
let db: TestDatabase;
let idempotency: Idempotency;
let runs = 0;
let handle: (request: Request) => Promise<Response>;

beforeAll(async () => {
  cluster = await startCluster('sync');
  db = await schemaOn(cluster.url, 'http_failover');
  await db.pool.query('CREATE TABLE charges (key text NOT NULL)');
  idempotency = createIdempotency({
    pool: db.pool,
    schema: db.schema,
    scope: 't',
    retryAfterSeconds: 2,
    migrate: false,
  });
  await idempotency.migrate();
  handle = idempotency.handler(async (_request, ctx) => {
    runs++;
    await ctx.tx.query('INSERT INTO charges (key) VALUES ($1)', [ctx.key]);
    return Response.json({ key: ctx.key }, { status: 201 });
  });
});
afterAll(async () => {
  await idempotency.close();
  await db.close();
  await cluster.stop();
});

const request = (key: string): Request =>
  new Request('http://api.test/charges', {
    method: 'POST',
    headers: { 'idempotency-key': key, 'content-type': 'application/json' },
    body: '{"amount":1}',
  });

describe('the HTTP door with its COMMIT cut by a failover', () => {
  it.each<[CommitArm, boolean]>([
    ['answered', true],
    ['sent', false],
  ])(
    'COMMIT %s: 503 outcome-unknown, then the retry settles it (replayed: %s), one charge',
    async (arm, replayed) => {
      await cluster.standbyReady();
      const key = randomUUID();
      const before = runs;
      const failover = cluster.failover({
        arm,
        armWaitMs: 20_000,
        // Sent: the standby falls behind first, so the COMMIT is never acknowledged.
        ...(arm === 'sent' ? { stallMs: 100 } : {}),
      });
      const cut = await handle(request(key));
      const report = await failover;
      expect(report.caught?.arm).toBe(arm);
      expect(cut.status).toBe(503);
      expect(cut.headers.get('retry-after')).toBe('2');
      expect(((await cut.json()) as { type?: string }).type).toMatch(/outcome-unknown$/);
      expect(report.unknown).toEqual([
        { xid: report.caught?.xid, status: replayed ? 'committed' : 'never replicated' },
      ]);

      const retry = await handle(request(key));
      expect(retry.status).toBe(201);
      expect(await retry.json()).toEqual({ key });
      expect(retry.headers.get('idempotent-replayed')).toBe(replayed ? 'true' : null);
      expect(runs - before).toBe(replayed ? 1 : 2);
      const { rows } = await db.pool.query<{ n: number }>(
        'SELECT count(*)::int AS n FROM charges WHERE key = $1',
        [key],
      );
      expect(rows[0]?.n).toBe(1);
    },
    120_000,
  );
});
