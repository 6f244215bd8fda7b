/**
 * The HTTP door on a node that cannot take writes (SQLSTATE 25006): a real hot standby
 * behind the failover proxy, and a server whose sessions start read-only (a demoted
 * primary behind a pooler, whose connections stay read-only until they are replaced).
 * The claim's INSERT meets 25006 before any handler runs. The answer is 503 with
 * `Retry-After` (never 500: the request is not at fault), nothing about the key is
 * stored (the retry runs the handler afresh, it is no replay of the 503), and the
 * connection that met the read-only node goes back to no one (the pool drops it), so
 * the first request after the node takes writes is applied at once.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, describe, expect, it } from '@jest/globals';
import { createIdempotency, type Idempotency } from '../../../src/http/index.js';
import { readOnlyNodes, type ReadOnlyNode } from './read-only-nodes.js';

describe('the HTTP door on a read-only node (SQLSTATE 25006)', () => {
  const opened: Array<{ node: ReadOnlyNode; idempotency: Idempotency }> = [];
  afterAll(async () => {
    for (const { node, idempotency } of opened) {
      await idempotency.close();
      await node.close();
    }
  });

  it.each(Object.keys(readOnlyNodes))(
    '%s: 503 with Retry-After, nothing stored, the connection dropped; applied once when it takes writes',
    async (name) => {
      const node = await readOnlyNodes[name]!();
      const { pool, schema } = node.db;
      await pool.query('CREATE TABLE charges (key text NOT NULL)');
      const idempotency = createIdempotency({
        pool,
        schema,
        scope: 't',
        retryAfterSeconds: 3,
        migrate: false,
      });
      opened.push({ node, idempotency });
      await idempotency.migrate();
      let runs = 0;
      const handle = idempotency.handler(async (_request, ctx) => {
        runs++;
        await ctx.tx.query('INSERT INTO charges (key) VALUES ($1)', [ctx.key]);
        return Response.json({ key: ctx.key }, { status: 201 });
      });
      const key = randomUUID();
      const request = (): Request =>
        new Request('http://api.test/charges', {
          method: 'POST',
          headers: { 'idempotency-key': key, 'content-type': 'application/json' },
          body: '{"amount":1}',
        });

      await node.makeReadOnly();
      for (let i = 0; i < 3; i++) {
        const answer = await handle(request());
        expect(answer.status).toBe(503);
        expect(answer.headers.get('retry-after')).toBe('3');
        expect(answer.headers.get('idempotent-replayed')).toBeNull();
        expect(((await answer.json()) as { type?: string }).type).toMatch(/unavailable$/);
        // The session that met the read-only node is not handed to the next request.
        expect(pool.totalCount).toBe(0);
      }
      expect(runs).toBe(0);

      await node.makeWritable();
      const applied = await handle(request());
      expect(applied.status).toBe(201);
      expect(applied.headers.get('idempotent-replayed')).toBeNull();
      expect(await applied.json()).toEqual({ key });
      expect(runs).toBe(1);
      const replay = await handle(request());
      expect(replay.status).toBe(201);
      expect(replay.headers.get('idempotent-replayed')).toBe('true');
      expect(runs).toBe(1);
      const { rows } = await pool.query<{ n: number }>(
        'SELECT count(*)::int AS n FROM charges WHERE key = $1',
        [key],
      );
      expect(rows[0]?.n).toBe(1);
    },
    90_000,
  );
});
