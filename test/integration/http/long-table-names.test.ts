import { randomUUID } from 'node:crypto';
import { describe, expect, it } from '@jest/globals';
import { migrate } from 'effectively-once';
import { paymentFixture, post } from './support.js';

const fixture = paymentFixture('http_long_names');

// 56 bytes shared: past it, `<table>_claim_v1` and `<table>_created_at_idx` used to be
// cut back into the shared part, so both tables got the same function and index names.
const PREFIX = 'tenant_card_payments_idempotency_keys_for_the_region_eu_';

describe('key tables whose names share a long prefix', () => {
  it("two tenants' endpoints keep their own functions: no cross-replay, each effect applied", async () => {
    const db = fixture.db();
    const scope = 'public';
    const alpha = await fixture.start({
      framework: 'hono',
      idempotency: { scope, table: `${PREFIX}alpha` },
    });
    const bravo = await fixture.start({
      framework: 'hono',
      idempotency: { scope, table: `${PREFIX}bravo` },
    });
    // Both migrated before either serves: the second one's functions used to replace the first's.
    await alpha.idempotency.migrate();
    await bravo.idempotency.migrate();
    const key = randomUUID();
    const body = { customerId: 'card_4242424242424242', amountCents: 500 };

    const first = await post(`${alpha.url}/charges`, key, body);
    const second = await post(`${bravo.url}/charges`, key, body);

    expect(first.status).toBe(201);
    expect(second.status).toBe(201);
    expect(second.headers['idempotent-replayed']).toBeUndefined();
    const idOf = (body: string): unknown => (JSON.parse(body) as { id: unknown }).id;
    expect(idOf(second.body)).not.toBe(idOf(first.body));
    expect(await fixture.effects(key)).toBe(2);
    // Each key row is in its own endpoint's table.
    for (const table of [`${PREFIX}alpha`, `${PREFIX}bravo`]) {
      const { rows } = await db.pool.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM ${db.table(table)} WHERE idempotency_key = $1`,
        [key],
      );
      expect(rows[0]?.n).toBe(1);
    }
    // A retry on each endpoint replays its own answer.
    expect((await post(`${alpha.url}/charges`, key, body)).body).toBe(first.body);
    expect((await post(`${bravo.url}/charges`, key, body)).body).toBe(second.body);
  });

  it('each long dedup table gets its own pruning index', async () => {
    const db = fixture.db();
    const tables = [`${PREFIX}c1`, `${PREFIX}c2`];
    for (const table of tables) await migrate(db.pool, { schema: db.schema, table });
    for (const table of tables) {
      const { rows } = await db.pool.query<{ indexdef: string }>(
        `SELECT indexdef FROM pg_indexes WHERE schemaname = $1 AND tablename = $2`,
        [db.schema, table],
      );
      const defs = rows.map((r) => r.indexdef);
      expect(defs.some((d) => d.includes('(processed_at)'))).toBe(true);
    }
  });
});
