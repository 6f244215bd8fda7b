import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createTestDatabase, databaseUrl, type TestDatabase } from '../../helpers/db.js';
import { CHARGE_TABLES } from './child-app.js';
import { spawnNest, type NestChild } from './spawn.js';

let db: TestDatabase;

beforeAll(async () => {
  db = await createTestDatabase('nest_http');
  await db.pool.query(CHARGE_TABLES);
});
afterAll(async () => db.close());

async function post(url: string, key: string | undefined, body: unknown): Promise<Response> {
  return fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(key ? { 'idempotency-key': key } : {}) },
    body: JSON.stringify(body),
  });
}

async function effects(key: string): Promise<number> {
  const { rows } = await db.pool.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM charges WHERE idem_key = $1',
    [key],
  );
  return rows[0]!.n;
}

describe.each(['express', 'fastify'] as const)(
  '@Idempotent() routes on platform-%s',
  (platform) => {
    let child: NestChild;
    let url: string;

    beforeAll(async () => {
      child = spawnNest({ platform, databaseUrl: databaseUrl(), schema: db.schema });
      url = `http://127.0.0.1:${await child.ready}`;
    });
    afterAll(async () => {
      // Nest's shutdown hooks ran to the last one, then it re-raised the signal.
      expect(await child.stop()).toBe('SIGTERM');
      expect(child.lines).toContain('closed');
    });

    it('commits the effect, then answers with the route status, headers and JSON body', async () => {
      const key = randomUUID();
      const response = await post(`${url}/charges`, key, { customer: 'c1', amount: 100 });
      expect(response.status).toBe(201);
      expect(response.headers.get('location')).toBe('/charges/latest');
      expect(response.headers.get('content-type')).toMatch(/^application\/json/);
      expect(response.headers.get('idempotent-replayed')).toBeNull();
      expect(await response.json()).toMatchObject({ customer: 'c1', amount: 100 });
      expect(await effects(key)).toBe(1);
      // The answer left after the COMMIT the child reported.
      expect(child.lines).toContain(`committed ${key}`);
    });

    it('replays the stored answer to a retry, without running the handler again', async () => {
      const key = randomUUID();
      const first = await post(`${url}/charges`, key, { customer: 'c2', amount: 5 });
      const firstBody = await first.text();
      const retry = await post(`${url}/charges`, key, { customer: 'c2', amount: 5 });
      expect(retry.status).toBe(201);
      expect(retry.headers.get('idempotent-replayed')).toBe('true');
      expect(retry.headers.get('location')).toBe('/charges/latest');
      expect(await retry.text()).toBe(firstBody);
      expect(await effects(key)).toBe(1);
    });

    it('applies concurrent duplicates once; each gets the committed answer', async () => {
      const key = randomUUID();
      // The first to claim holds the key a while; the others wait on it (concurrent: 'wait').
      const body = { customer: 'c3', amount: 7, holdMs: 500 };
      const responses = await Promise.all(
        Array.from({ length: 6 }, () => post(`${url}/charges`, key, body)),
      );
      const bodies = await Promise.all(responses.map((r) => r.text()));
      expect(responses.map((r) => r.status)).toEqual([201, 201, 201, 201, 201, 201]);
      expect(new Set(bodies).size).toBe(1);
      const replayed = responses.filter((r) => r.headers.get('idempotent-replayed') === 'true');
      expect(replayed).toHaveLength(5);
      expect(await effects(key)).toBe(1);
    });

    it('refuses the key reused with another body (422), nothing applied', async () => {
      const key = randomUUID();
      expect((await post(`${url}/charges`, key, { customer: 'c4', amount: 1 })).status).toBe(201);
      const reused = await post(`${url}/charges`, key, { customer: 'c4', amount: 2 });
      expect(reused.status).toBe(422);
      expect(await effects(key)).toBe(1);
    });

    it('refuses a POST without a key (400) before the handler runs', async () => {
      const response = await post(`${url}/charges`, undefined, { customer: 'c5', amount: 1 });
      expect(response.status).toBe(400);
      const { rows } = await db.pool.query("SELECT 1 FROM charges WHERE customer = 'c5'");
      expect(rows).toHaveLength(0);
    });

    it('keeps @HttpCode and a text answer; a thrown HttpException rolls back, unstored', async () => {
      const ok = await post(`${url}/charges/alice/refunds`, randomUUID(), {});
      expect(ok.status).toBe(202);
      expect(await ok.text()).toBe('refund queued for alice');

      const key = randomUUID();
      const refused = await post(`${url}/charges/ghost/refunds`, key, {});
      expect(refused.status).toBe(404);
      expect(((await refused.json()) as { message: string }).message).toBe('no such customer');
      expect(await effects(key)).toBe(0);
      // Nothing was stored: the retry runs the handler again, and is refused again.
      const again = await post(`${url}/charges/ghost/refunds`, key, {});
      expect(again.status).toBe(404);
      expect(again.headers.get('idempotent-replayed')).toBeNull();
      expect(await effects(key)).toBe(0);
    });
  },
);
