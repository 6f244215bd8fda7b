import { serve } from '@hono/node-server';
import { Hono } from 'hono';
import type { Idempotency } from 'effectively-once/http';
import {
  bigEffect,
  bigText,
  charge,
  portOf,
  recordDelivery,
  webhookOptions,
  type PaymentHooks,
} from './payments.js';

/**
 * The payment API on Hono, with no adapter: Hono hands the core its web-standard
 * Request (`c.req.raw`) and sends the Response it gets back.
 */
export async function serveHono(
  idempotency: Idempotency,
  hooks: PaymentHooks,
  port: number,
): Promise<{ port: number; close(): Promise<void> }> {
  const app = new Hono();
  const charges = idempotency.handler(async (request, ctx) => {
    const created = await charge(ctx, (await request.json()) as object, hooks);
    const failure = hooks.fail?.(ctx.key);
    if (failure === 'throw') throw new Error('charge failed after the effect');
    if (typeof failure === 'number') return Response.json({ failed: true }, { status: failure });
    return Response.json(created, {
      status: 201,
      headers: {
        location: `/charges/${created.id}`,
        'set-cookie': `session=${created.id}; HttpOnly`,
        'x-run': String(ctx.attempt),
      },
    });
  });
  app.post('/charges', (c) => charges(c.req.raw));
  const big = idempotency.handler(async (request, ctx) => {
    await bigEffect(ctx);
    const url = new URL(request.url);
    const text = bigText(Number(url.searchParams.get('bytes') ?? 0));
    const headers = { 'content-type': 'text/plain', location: '/big/1' };
    if (url.searchParams.get('stream') !== '1') return new Response(text, { headers });
    const bytes = new TextEncoder().encode(text);
    const stream = new ReadableStream<Uint8Array>({
      start(controller) {
        for (let i = 0; i < bytes.length; i += 4096) controller.enqueue(bytes.slice(i, i + 4096));
        controller.close();
      },
    });
    return ctx.streamed(new Response(stream, { headers }));
  });
  app.post('/big', (c) => big(c.req.raw));
  for (const sender of ['github', 'stripe', 'shopify', 'generic']) {
    const receive = idempotency.webhook(webhookOptions(sender), async (_request, ctx) => {
      await recordDelivery(ctx, sender);
      return Response.json({ received: ctx.key });
    });
    app.post(`/webhooks/${sender}`, (c) => receive(c.req.raw));
  }
  const server = await new Promise<ReturnType<typeof serve>>((resolve) => {
    const s = serve({ fetch: app.fetch, port, hostname: '127.0.0.1' }, () => resolve(s));
  });
  return {
    port: portOf(server.address()),
    close: () =>
      new Promise<void>((resolve) => {
        if ('closeAllConnections' in server) server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
