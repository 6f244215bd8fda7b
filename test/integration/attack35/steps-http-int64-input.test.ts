/**
 * Attack on the steps HTTP door's recorded input (attack35).
 *
 * Promise (docs/steps.md): the flow's input is "the JSON body by default, recorded at the
 * first claim", and `input: (body, request) => …` lets a route "pick more"; the flow acts
 * on the request it was sent.
 *
 * Attack: ids as int64 JSON numbers, as many APIs send them (`{"orderId":
 * 9007199254740993}`). The flow records the order id it acts on in a database step.
 *
 * Observed on main: the door reads the body, JSON.parses it (src/steps/http-door.ts
 * parseBody) and records the parse's round trip: the id is rounded to 9007199254740992,
 * another order. The route cannot get the sent digits back: `input` gets the parsed value
 * and the Request whose body the door already consumed (`request.text()` rejects). Two
 * requests for orders …992 and …993 both act on order …992. (The plain door hands its
 * handler the bytes, so a handler there can parse exactly.)
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from '@jest/globals';
import { defineFlow } from 'effectively-once';
import { createIdempotency } from 'effectively-once/http';
import { createTestDatabase } from '../../helpers/db.js';

describe('attack35: int64 ids in a steps route body', () => {
  // OPEN (issue 35): a confirmed break not fixed yet. `it.failing` keeps it recorded and
  // turns red the day the door hands the route the sent digits: then make it `it`.
  it.failing('the flow acts on the order id the request sent', async () => {
    const db = await createTestDatabase('a35_int64');
    const idempotency = createIdempotency({ pool: db.pool, schema: db.schema, scope: 'tenant' });
    try {
      const flow = defineFlow<{ orderId: string }>('ship', async (input, run) => {
        const shipped = await run.step('ship', () => input.orderId);
        return { status: 201, body: { shipped } };
      });
      // The route picks the id as text from the exact body, when it can; else the parse's.
      const route = idempotency.steps(flow, {
        input: async (body, request) => {
          const exact = await request.text().then(
            (text) => /"orderId"\s*:\s*(\d+)/.exec(text)?.[1],
            () => undefined,
          );
          return { orderId: exact ?? String((body as { orderId: number }).orderId) };
        },
      });
      const sent = '9007199254740993';
      const response = await route(
        new Request('http://localhost/shipments', {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'idempotency-key': randomUUID() },
          body: `{"orderId": ${sent}}`,
        }),
      );
      expect(response.status).toBe(201);
      expect(((await response.json()) as { shipped: string }).shipped).toBe(sent);
    } finally {
      await idempotency.close();
      await db.close();
    }
  });
});
