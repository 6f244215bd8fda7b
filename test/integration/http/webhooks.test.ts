import { randomUUID } from 'node:crypto';
import { describe, expect, it } from '@jest/globals';
import { FRAMEWORKS } from '../../../kit/payments/payments.js';
import { answer, paymentFixture, type Answer } from './support.js';

const fixture = paymentFixture('http_webhooks');

/** How each sender names a delivery: headers and a body for the id. */
const deliveries: Record<
  string,
  (id: string, n: number) => { headers: Record<string, string>; body: unknown }
> = {
  github: (id, n) => ({ headers: { 'x-github-delivery': id }, body: { action: 'opened', n } }),
  // Stripe resends the same event; fields like pending_webhooks change between tries.
  stripe: (id, n) => ({
    headers: {},
    body: { id, type: 'charge.succeeded', pending_webhooks: 3 - n },
  }),
  // Shopify: one event id on every duplicate, whose webhook id may differ.
  shopify: (id, n) => ({
    headers: { 'x-shopify-event-id': id, 'x-shopify-webhook-id': `${id}-w${n}` },
    body: { order: 1, n },
  }),
  generic: (id, n) => ({ headers: {}, body: { delivery: { id }, n } }),
};

async function deliver(
  url: string,
  sender: string,
  id: string,
  n: number,
  signed = true,
): Promise<Answer> {
  const { headers, body } = deliveries[sender]!(id, n);
  return answer(
    await fetch(`${url}/webhooks/${sender}`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        ...(signed ? { 'x-test-signature': 'ok' } : {}),
        ...headers,
      },
      body: JSON.stringify(body),
    }),
  );
}

describe.each(FRAMEWORKS)('%s: webhook receivers keyed on the delivery id', (framework) => {
  it.each(Object.keys(deliveries))(
    '%s: a redelivery gets the stored 2xx; the effect is applied once',
    async (sender) => {
      const server = await fixture.start({ framework });
      const id = `d-${randomUUID()}`;
      const first = await deliver(server.url, sender, id, 0);
      const again = await deliver(server.url, sender, id, 1);
      expect(first.status).toBe(200);
      expect(JSON.parse(first.body)).toEqual({ received: id });
      expect(first.headers['idempotent-replayed']).toBeUndefined();
      expect(again).toMatchObject({ status: 200, body: first.body });
      expect(again.headers['idempotent-replayed']).toBe('true');
      expect(await fixture.deliveries(sender, id)).toBe(1);
    },
  );

  it('verify, then claim: an unverified delivery is 401 and takes nothing', async () => {
    const server = await fixture.start({ framework });
    const id = randomUUID();
    const forged = await deliver(server.url, 'github', id, 0, false);
    expect(forged.status).toBe(401);
    expect(JSON.parse(forged.body)).toMatchObject({ code: 'EO_WEBHOOK_UNVERIFIED' });
    expect(await fixture.deliveries('github', id)).toBe(0);
    // The id was not claimed: the genuine delivery applies (not a replay).
    const genuine = await deliver(server.url, 'github', id, 0);
    expect(genuine.status).toBe(200);
    expect(genuine.headers['idempotent-replayed']).toBeUndefined();
    expect(await fixture.deliveries('github', id)).toBe(1);
  });

  it('a delivery without its id is 400, nothing applied', async () => {
    const server = await fixture.start({ framework });
    const response = await fetch(`${server.url}/webhooks/shopify`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-test-signature': 'ok' },
      body: '{}',
    });
    expect(response.status).toBe(400);
    expect(await response.json()).toMatchObject({ code: 'EO_IDEMPOTENCY_KEY_MISSING' });
  });

  it("delivery ids are scoped per sender: GitHub's id never replays Shopify's answer", async () => {
    const server = await fixture.start({ framework });
    const id = randomUUID();
    await deliver(server.url, 'github', id, 0);
    const shopify = await deliver(server.url, 'shopify', id, 0);
    expect(shopify.status).toBe(200);
    expect(shopify.headers['idempotent-replayed']).toBeUndefined();
    expect(await fixture.deliveries('shopify', id)).toBe(1);
  });
});
