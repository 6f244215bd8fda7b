import http from 'node:http';
import express from 'express';
import type { Idempotency } from 'effectively-once/http';
import { expressWebhook, idempotentExpress } from 'effectively-once/http/express';
import {
  bigEffect,
  bigText,
  charge,
  portOf,
  recordDelivery,
  webhookOptions,
  type PaymentHooks,
} from './payments.js';

/** The payment API on Express 5 through idempotentExpress. */
export async function serveExpress(
  idempotency: Idempotency,
  hooks: PaymentHooks,
  port: number,
): Promise<{ port: number; close(): Promise<void> }> {
  const app = express();
  app.post(
    '/charges',
    idempotentExpress(idempotency, async (req, res, ctx) => {
      const created = await charge(ctx, req.body as object, hooks);
      const failure = hooks.fail?.(ctx.key);
      if (failure === 'throw') throw new Error('charge failed after the effect');
      if (typeof failure === 'number') {
        res.status(failure).json({ failed: true });
        return;
      }
      res
        .status(201)
        .location(`/charges/${created.id}`)
        .cookie('session', created.id, { httpOnly: true })
        .set('x-run', String(ctx.attempt))
        .json(created);
    }),
  );
  app.post(
    '/big',
    idempotentExpress(idempotency, async (req, res, ctx) => {
      await bigEffect(ctx);
      const text = bigText(Number(req.query.bytes ?? 0));
      res.status(200).type('text/plain').location('/big/1');
      if (req.query.stream !== '1') {
        res.send(text);
        return;
      }
      res.flushHeaders();
      for (let i = 0; i < text.length; i += 4096) res.write(text.slice(i, i + 4096));
      res.end();
    }),
  );
  for (const sender of ['github', 'stripe', 'shopify', 'generic']) {
    app.post(
      `/webhooks/${sender}`,
      expressWebhook(idempotency, webhookOptions(sender), async (_req, res, ctx) => {
        await recordDelivery(ctx, sender);
        res.json({ received: ctx.key });
      }),
    );
  }
  const server = http.createServer(app);
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return {
    port: portOf(server.address()),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
