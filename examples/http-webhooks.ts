/**
 * Webhook receivers for GitHub and Stripe that apply each delivery once, however often
 * the sender redelivers it: verify the signature on the raw body FIRST, then the
 * delivery id (X-GitHub-Delivery, the Stripe event's id) is claimed in the same
 * transaction as the effect, and a redelivery gets the stored 2xx. Fetch-style here
 * (Hono); with Express use `expressWebhook`, with Fastify a route's
 * `config: { idempotency: { webhook } }`.
 *
 *   DATABASE_URL=postgres://… GITHUB_WEBHOOK_SECRET=… STRIPE_WEBHOOK_SECRET=whsec_… \
 *   PORT=3000 npx tsx examples/http-webhooks.ts
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { pathToFileURL } from 'node:url';
import { serve } from '@hono/node-server';
import { Hono } from 'hono';
import pg from 'pg';
import { createIdempotency, webhookSources } from 'effectively-once/http';

export interface ServerOptions {
  /** Stop when this aborts. Run directly, SIGINT and SIGTERM abort it. */
  signal: AbortSignal;
  /** DATABASE_URL, PORT, GITHUB_WEBHOOK_SECRET, STRIPE_WEBHOOK_SECRET. Default `process.env`. */
  env?: NodeJS.ProcessEnv;
  /** Told the base URL once the server listens. */
  onListening?: (url: string) => void;
}

/** GitHub's scheme: `X-Hub-Signature-256: sha256=<hex HMAC of the raw body>`. */
export function githubSignature(secret: string, body: Uint8Array): string {
  return `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
}

/** Stripe's scheme: `Stripe-Signature: t=<unix>,v1=<hex HMAC of "<t>.<raw body>">`. */
export function stripeSignature(secret: string, body: Uint8Array, timestamp: number): string {
  const signed = createHmac('sha256', secret).update(`${timestamp}.`).update(body).digest('hex');
  return `t=${timestamp},v1=${signed}`;
}

export async function main({
  signal,
  env = process.env,
  onListening,
}: ServerOptions): Promise<void> {
  const githubSecret = required(env, 'GITHUB_WEBHOOK_SECRET');
  const stripeSecret = required(env, 'STRIPE_WEBHOOK_SECRET');
  const pool = new pg.Pool({ connectionString: required(env, 'DATABASE_URL') });
  await pool.query(`
    CREATE TABLE IF NOT EXISTS events (
      sender      text NOT NULL,
      delivery_id text NOT NULL,
      kind        text NOT NULL
    )`);
  // The scope of a delivery id is its sender (webhook:github …), not a tenant.
  const idempotency = createIdempotency({ pool, scope: 'public' });

  const github = idempotency.webhook(
    {
      source: webhookSources.github,
      verify: (request, body) =>
        same(request.headers.get('x-hub-signature-256'), githubSignature(githubSecret, body)),
    },
    async (request, { tx, key }) => {
      await tx.query("INSERT INTO events (sender, delivery_id, kind) VALUES ('github', $1, $2)", [
        key,
        request.headers.get('x-github-event') ?? 'unknown',
      ]);
      return new Response('ok');
    },
  );

  const stripe = idempotency.webhook(
    {
      source: webhookSources.stripe,
      verify: (request, body) => {
        // Stripe's SDK does this: stripe.webhooks.constructEvent(body, header, secret).
        const header = request.headers.get('stripe-signature') ?? '';
        const t = Number(/(?:^|,)t=(\d+)/.exec(header)?.[1]);
        const v1 = /(?:^|,)v1=([0-9a-f]+)/.exec(header)?.[1] ?? '';
        const fresh = Math.abs(Date.now() / 1000 - t) < 300;
        return fresh && same(`t=${t},v1=${v1}`, stripeSignature(stripeSecret, body, t));
      },
    },
    async (request, { tx, key }) => {
      const event = (await request.json()) as { type?: string };
      await tx.query("INSERT INTO events (sender, delivery_id, kind) VALUES ('stripe', $1, $2)", [
        key,
        event.type ?? 'unknown',
      ]);
      // Nothing returned: 204 No Content, stored and replayed like any answer.
    },
  );

  const app = new Hono();
  app.post('/webhooks/github', (c) => github(c.req.raw));
  app.post('/webhooks/stripe', (c) => stripe(c.req.raw));

  const server = serve({ fetch: app.fetch, port: Number(env.PORT ?? 3000), hostname: '127.0.0.1' });
  await new Promise<void>((resolve) => server.once('listening', resolve));
  const address = server.address();
  if (address !== null && typeof address === 'object')
    onListening?.(`http://127.0.0.1:${address.port}`);

  await aborted(signal);
  await new Promise<void>((resolve) => server.close(() => resolve()));
  await idempotency.close();
  await pool.end();
}

function same(given: string | null, expected: string): boolean {
  const a = Buffer.from(given ?? '');
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}

function required(env: NodeJS.ProcessEnv, name: string): string {
  const value = env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
}

function aborted(signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) resolve();
    else signal.addEventListener('abort', () => resolve(), { once: true });
  });
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const stop = new AbortController();
  process.once('SIGINT', () => stop.abort());
  process.once('SIGTERM', () => stop.abort());
  await main({ signal: stop.signal, onListening: (url) => console.log(`listening on ${url}`) });
}
