import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createIdempotency } from 'effectively-once/http';
import { enqueue, migrateOutbox } from 'effectively-once/outbox';
import { createTestDatabase, type TestDatabase } from '../../helpers/db.js';

let db: TestDatabase;

beforeAll(async () => {
  db = await createTestDatabase('outbox_http');
  await migrateOutbox(db.pool, { schema: db.schema });
});

afterAll(async () => {
  await db.close();
});

describe("enqueue in an HTTP idempotent handler's ctx.tx", () => {
  it('writes one outbox row per Idempotency-Key, and none when the handler fails', async () => {
    const idempotency = createIdempotency({ pool: db.pool, scope: 'test', schema: db.schema });
    try {
      const handler = idempotency.handler(async (request, { tx }) => {
        const body = (await request.json()) as { fail?: boolean; n: number };
        await enqueue(tx, { destination: 'mail', payload: body }, { schema: db.schema });
        if (body.fail === true) throw new Error('after the enqueue');
        return Response.json({ ok: true }, { status: 201 });
      });
      const post = (key: string, body: object) =>
        handler(
          new Request('http://local/mail', {
            method: 'POST',
            headers: { 'idempotency-key': key, 'content-type': 'application/json' },
            body: JSON.stringify(body),
          }),
        );
      expect((await post('k1', { n: 1 })).status).toBe(201);
      const again = await post('k1', { n: 1 });
      expect(again.status).toBe(201);
      expect(again.headers.get('idempotent-replayed')).toBe('true');
      expect((await post('k2', { n: 2, fail: true })).status).toBe(500);

      const { rows } = await db.pool.query<{ payload: Buffer }>(
        `SELECT payload FROM ${db.table('eo_outbox')}`,
      );
      expect(rows.map((r) => JSON.parse(r.payload.toString()) as unknown)).toEqual([{ n: 1 }]);
    } finally {
      await idempotency.close();
    }
  });
});
