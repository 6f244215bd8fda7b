/**
 * Issue 32, defect 3's audit: a handler that makes its transaction read-only
 * (`SET TRANSACTION READ ONLY`) gets the library's own last write, run in the COMMIT's
 * round trip (an idempotent request's stored response), refused with 25006. The server
 * answered with an ERROR on a live session, so COMMIT never ran: a known rollback,
 * never "outcome unknown" (only a connection dead during COMMIT leaves it unknown).
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createIdempotency, migrateKeyTable } from 'effectively-once/http';
import { createTestDatabase, type TestDatabase } from '../../helpers/db.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase('read_only_commit');
  await migrateKeyTable(db.pool, { schema: db.schema });
});
afterAll(async () => db.close());

describe('SET TRANSACTION READ ONLY in an idempotent request handler', () => {
  it('is answered as not applied, not as an unknown outcome; the key stays free', async () => {
    const idempotency = createIdempotency({
      pool: db.pool,
      scope: 't',
      schema: db.schema,
      migrate: false,
    });
    let readOnly = true;
    const route = idempotency.handler(async (_request, ctx) => {
      if (readOnly) await ctx.tx.query('SET TRANSACTION READ ONLY');
      return Response.json({ ok: true }, { status: 201 });
    });
    const request = () =>
      new Request('http://localhost/charges', {
        method: 'POST',
        headers: { 'idempotency-key': 'k-1', 'content-type': 'application/json' },
        body: '{}',
      });
    try {
      const first = await route(request());
      const problem = (await first.json()) as { type?: string };
      expect(problem.type).not.toMatch(/outcome-unknown/);
      expect(first.status).toBeGreaterThanOrEqual(500);
      readOnly = false;
      expect((await route(request())).status).toBe(201);
    } finally {
      await idempotency.close({ timeoutMs: 1000 });
    }
  });
});
