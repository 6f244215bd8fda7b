import { randomInt } from 'node:crypto';
import { describe, expect, it } from '@jest/globals';
import { FRAMEWORKS } from '../../../kit/payments/payments.js';
import { answer, paymentFixture, type Answer } from './support.js';

const fixture = paymentFixture('http_webhook_ids');

/** The JSON text of a body carrying `id` (already JSON text) where each receiver reads it. */
const bodies: Record<string, (id: string) => string> = {
  // bodyFieldSource('generic', ['delivery', 'id'])
  generic: (id) => `{"delivery":{"id":${id}},"n":1}`,
  // webhookSources.stripe: bodyFieldSource('stripe', 'id')
  stripe: (id) => `{"id":${id},"type":"charge.succeeded","pending_webhooks":1}`,
};

async function deliver(url: string, sender: string, id: string): Promise<Answer> {
  return answer(
    await fetch(`${url}/webhooks/${sender}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-test-signature': 'ok' },
      body: bodies[sender]!(id),
    }),
  );
}

async function applied(sender: string): Promise<number> {
  const { rows } = await fixture
    .db()
    .pool.query<{ n: number }>('SELECT count(*)::int AS n FROM deliveries WHERE sender = $1', [
      sender,
    ]);
  return rows[0]?.n ?? -1;
}

/** Two int64 ids one apart above 2^53: one double, so JSON.parse reads both as one number. */
function int64Pair(): [string, string] {
  // A multiple of 1024 near 2^60 is a double exactly; one more rounds back to it.
  const a = 2n ** 60n + BigInt(randomInt(1, 2 ** 40)) * 1024n;
  const b = a + 1n;
  expect(Number(a)).toBe(Number(b));
  return [a.toString(), b.toString()];
}

describe.each(FRAMEWORKS)('%s: webhook ids read from the JSON body', (framework) => {
  it.each(Object.keys(bodies))(
    '%s: two int64 ids differing past 2^53 are two deliveries, each applied once',
    async (sender) => {
      const server = await fixture.start({ framework });
      const [a, b] = int64Pair();
      const first = await deliver(server.url, sender, a);
      const second = await deliver(server.url, sender, b);
      expect(first.status).toBe(200);
      expect(first.headers['idempotent-replayed']).toBeUndefined();
      expect(second.status).toBe(200);
      expect(second.headers['idempotent-replayed']).toBeUndefined();
      // Keyed by the exact digits of the source text.
      expect(JSON.parse(first.body)).toEqual({ received: a });
      expect(JSON.parse(second.body)).toEqual({ received: b });
      expect(await fixture.deliveries(sender, a)).toBe(1);
      expect(await fixture.deliveries(sender, b)).toBe(1);
      // Redeliveries are still recognised.
      const again = await deliver(server.url, sender, b);
      expect(again).toMatchObject({ status: 200, body: second.body });
      expect(again.headers['idempotent-replayed']).toBe('true');
      expect(await fixture.deliveries(sender, b)).toBe(1);
    },
  );

  it('string ids are kept exactly: " x", "x " and "\\"x\\"" are three deliveries, not "x"', async () => {
    const server = await fixture.start({ framework });
    const x = `w-${randomInt(1, 2 ** 40)}`;
    for (const id of [x, ` ${x}`, `${x} `, `"${x}"`]) {
      const response = await deliver(server.url, 'generic', JSON.stringify(id));
      expect(response.status).toBe(200);
      expect(response.headers['idempotent-replayed']).toBeUndefined();
      expect(JSON.parse(response.body)).toEqual({ received: id });
      expect(await fixture.deliveries('generic', id)).toBe(1);
    }
  });

  it.each([
    ['a fraction', '1.5'],
    ['a fraction of zero', '10.0'],
    ['an exponent', '1e3'],
    ['a negative zero', '-0'],
    ['a boolean', 'true'],
    ['an object', '{"n":1}'],
    ['an array', '[1]'],
    ['an empty string', '""'],
    ['a lone surrogate', '"a\\ud800"'],
    ['a non-ASCII string', '"é"'],
  ])(
    'an id that is %s (%s) is refused 400 EO_WEBHOOK_ID_INVALID, nothing applied',
    async (_what, id) => {
      const server = await fixture.start({ framework });
      const before = await applied('generic');
      const response = await deliver(server.url, 'generic', id);
      expect(response.status).toBe(400);
      expect(response.headers['content-type']).toContain('application/problem+json');
      expect(JSON.parse(response.body)).toMatchObject({
        code: 'EO_WEBHOOK_ID_INVALID',
        status: 400,
      });
      expect(await applied('generic')).toBe(before);
    },
  );

  it('a null id is a missing one: 400 EO_IDEMPOTENCY_KEY_MISSING, nothing applied', async () => {
    const server = await fixture.start({ framework });
    const before = await applied('stripe');
    const response = await deliver(server.url, 'stripe', 'null');
    expect(response.status).toBe(400);
    expect(JSON.parse(response.body)).toMatchObject({ code: 'EO_IDEMPOTENCY_KEY_MISSING' });
    expect(await applied('stripe')).toBe(before);
  });

  it('integers are accepted in every form JSON writes one: 0, negative, large', async () => {
    const server = await fixture.start({ framework });
    const big = `${randomInt(1, 2 ** 40)}${'7'.repeat(40)}`;
    for (const id of ['0', `-${randomInt(1, 2 ** 40)}`, big]) {
      const response = await deliver(server.url, 'generic', id);
      expect(response.status).toBe(200);
      expect(JSON.parse(response.body)).toEqual({ received: id });
    }
  });
});
