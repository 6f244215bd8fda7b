import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from '@jest/globals';
import {
  createIdempotency,
  toNodeListener,
  webhookSources,
  type WebhookOptions,
} from 'effectively-once/http';
import { FRAMEWORKS } from '../../../kit/payments/payments.js';
import { answer, paymentFixture, type Answer } from './support.js';

const fixture = paymentFixture('http_webhook_presets');

async function shopify(url: string, headers: Record<string, string>): Promise<Answer> {
  return answer(
    await fetch(`${url}/webhooks/shopify`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'x-test-signature': 'ok',
        'x-shopify-topic': 'orders/create',
        ...headers,
      },
      body: '{"id":820982911946154508,"name":"#9999"}',
    }),
  );
}

describe('the presets key on what each sender documents', () => {
  it.each([
    ['github', 'X-GitHub-Delivery header'],
    ['stripe', '"id" field of the JSON body'],
    ['shopify', 'X-Shopify-Event-Id header'],
  ] as const)('%s keys on the %s', (sender, describe) => {
    expect(webhookSources[sender].describe).toBe(describe);
  });
});

describe.each(FRAMEWORKS)('%s: Shopify deliveries keyed on X-Shopify-Event-Id', (framework) => {
  it('a duplicate of one event under another X-Shopify-Webhook-Id is applied once', async () => {
    const server = await fixture.start({ framework });
    const event = randomUUID();
    const first = await shopify(server.url, {
      'x-shopify-event-id': event,
      'x-shopify-webhook-id': randomUUID(),
    });
    const duplicate = await shopify(server.url, {
      'x-shopify-event-id': event,
      'x-shopify-webhook-id': randomUUID(),
    });
    expect(first.status).toBe(200);
    expect(JSON.parse(first.body)).toEqual({ received: event });
    expect(duplicate).toMatchObject({ status: 200, body: first.body });
    expect(duplicate.headers['idempotent-replayed']).toBe('true');
    expect(await fixture.deliveries('shopify', event)).toBe(1);
  });

  it('two events are two deliveries, whatever their X-Shopify-Webhook-Id', async () => {
    const server = await fixture.start({ framework });
    const webhookId = randomUUID();
    const events = [randomUUID(), randomUUID()];
    for (const event of events) {
      const response = await shopify(server.url, {
        'x-shopify-event-id': event,
        'x-shopify-webhook-id': webhookId,
      });
      expect(response.status).toBe(200);
      expect(response.headers['idempotent-replayed']).toBeUndefined();
      expect(await fixture.deliveries('shopify', event)).toBe(1);
    }
  });

  it('a delivery without X-Shopify-Event-Id is keyed on X-Shopify-Webhook-Id', async () => {
    const server = await fixture.start({ framework });
    const webhookId = randomUUID();
    const first = await shopify(server.url, { 'x-shopify-webhook-id': webhookId });
    const again = await shopify(server.url, { 'x-shopify-webhook-id': webhookId });
    expect(first.status).toBe(200);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(await fixture.deliveries('shopify', webhookId)).toBe(1);
  });

  it('a delivery with neither header is 400, naming the event id header', async () => {
    const server = await fixture.start({ framework });
    const response = await shopify(server.url, {});
    expect(response.status).toBe(400);
    expect(JSON.parse(response.body)).toMatchObject({
      code: 'EO_IDEMPOTENCY_KEY_MISSING',
      title: 'X-Shopify-Event-Id header is missing',
    });
  });
});

describe('one event subscribed on two routes', () => {
  /** Routes /a and /b under the default scope, /c under its own: each records its applications. */
  async function start(): Promise<{ url: string; close: () => Promise<void> }> {
    const db = fixture.db();
    await db.pool.query('CREATE TABLE IF NOT EXISTS route_events (route text, event text)');
    const idempotency = createIdempotency({ pool: db.pool, schema: db.schema, scope: 'shop' });
    const receiver = (route: string, scope?: string) => {
      const options: WebhookOptions = {
        source: webhookSources.shopify,
        verify: false,
        ...(scope !== undefined ? { scope } : {}),
      };
      return idempotency.webhook(options, async (_request, ctx) => {
        await ctx.tx.query('INSERT INTO route_events VALUES ($1, $2)', [route, ctx.key]);
      });
    };
    const routes: Record<string, (request: Request) => Promise<Response>> = {
      '/a': receiver('a'),
      '/b': receiver('b'),
      '/c': receiver('c', 'webhook:shopify:c'),
    };
    const server: Server = createServer(
      toNodeListener((request) => routes[new URL(request.url).pathname]!(request)),
    );
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    return {
      url: `http://127.0.0.1:${port}`,
      close: async () => {
        await new Promise<void>((resolve) => server.close(() => resolve()));
        await idempotency.close();
      },
    };
  }

  it('is one application per webhook scope: a second route under the same scope is 422, its own scope applies it', async () => {
    const app = await start();
    try {
      const event = randomUUID();
      const send = async (route: string) =>
        (
          await fetch(`${app.url}${route}`, {
            method: 'POST',
            headers: { 'x-shopify-event-id': event, 'x-shopify-webhook-id': randomUUID() },
            body: '{}',
          })
        ).status;
      expect(await send('/a')).toBe(204);
      expect(await send('/b')).toBe(422);
      expect(await send('/c')).toBe(204);
      const { rows } = await fixture
        .db()
        .pool.query<{ route: string }>(
          'SELECT route FROM route_events WHERE event = $1 ORDER BY route',
          [event],
        );
      expect(rows.map((r) => r.route)).toEqual(['a', 'c']);
    } finally {
      await app.close();
    }
  });
});
