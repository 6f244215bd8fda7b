import { Readable } from 'node:stream';
import Fastify from 'fastify';
import type { Idempotency } from 'effectively-once/http';
import { idempotencyPlugin } from 'effectively-once/http/fastify';
import {
  bigEffect,
  bigText,
  charge,
  recordDelivery,
  webhookOptions,
  type PaymentHooks,
} from './payments.js';

/** The payment API on Fastify 5 through idempotencyPlugin. */
export async function serveFastify(
  idempotency: Idempotency,
  hooks: PaymentHooks,
  port: number,
): Promise<{ port: number; close(): Promise<void> }> {
  const app = Fastify();
  await app.register(idempotencyPlugin, { idempotency });
  app.post('/charges', async (request, reply) => {
    const ctx = request.idempotency;
    if (ctx === null) throw new Error('not idempotent');
    const created = await charge(ctx, request.body as object, hooks);
    const failure = hooks.fail?.(ctx.key);
    if (failure === 'throw') throw new Error('charge failed after the effect');
    if (typeof failure === 'number') return reply.code(failure).send({ failed: true });
    reply
      .code(201)
      .header('location', `/charges/${created.id}`)
      .header('set-cookie', `session=${created.id}; HttpOnly`)
      .header('x-run', String(ctx.attempt));
    return created;
  });
  app.addContentTypeParser('text/plain', { parseAs: 'string' }, (_req, body, done) =>
    done(null, body),
  );
  app.post<{ Querystring: { bytes?: string; stream?: string } }>('/big', async (request, reply) => {
    const ctx = request.idempotency;
    if (ctx === null) throw new Error('not idempotent');
    await bigEffect(ctx);
    const text = bigText(Number(request.query.bytes ?? 0));
    reply.type('text/plain').header('location', '/big/1');
    if (request.query.stream !== '1') return text;
    const chunks: string[] = [];
    for (let i = 0; i < text.length; i += 4096) chunks.push(text.slice(i, i + 4096));
    return reply.send(Readable.from(chunks));
  });
  for (const sender of ['github', 'stripe', 'shopify', 'generic']) {
    app.post(
      `/webhooks/${sender}`,
      { config: { idempotency: { webhook: webhookOptions(sender) } } },
      async (request) => {
        const ctx = request.idempotency;
        if (ctx === null) throw new Error('not idempotent');
        await recordDelivery(ctx, sender);
        return { received: ctx.key };
      },
    );
  }
  await app.listen({ port, host: '127.0.0.1' });
  const address = app.server.address();
  if (address === null || typeof address === 'string') throw new Error('not on TCP');
  return {
    port: address.port,
    close: async () => {
      app.server.closeAllConnections();
      await app.close();
    },
  };
}
