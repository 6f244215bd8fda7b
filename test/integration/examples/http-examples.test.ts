import { randomUUID } from 'node:crypto';
import { afterEach, describe, expect, it } from '@jest/globals';
import { idempotentFetch } from 'effectively-once/client';
import * as express from '../../../examples/http-express.js';
import * as fastify from '../../../examples/http-fastify.js';
import * as payments from '../../../examples/http-payments.js';
import * as webhooks from '../../../examples/http-webhooks.js';
import { createExampleDatabase, type ExampleDatabase } from './support.js';

type Main = (options: {
  signal: AbortSignal;
  env?: NodeJS.ProcessEnv;
  onListening?: (url: string) => void;
}) => Promise<void>;

const running: Array<{ stop: () => Promise<void>; db: ExampleDatabase }> = [];
afterEach(async () => {
  for (const r of running.splice(0)) {
    await r.stop();
    await r.db.drop();
  }
});

/** Runs an example's main against a database of its own; resolves with its URL. */
async function start(
  main: Main,
  extra: NodeJS.ProcessEnv = {},
): Promise<{ url: string; db: ExampleDatabase }> {
  const db = await createExampleDatabase('http');
  const abort = new AbortController();
  let url = '';
  let listening: () => void = () => undefined;
  const ready = new Promise<void>((resolve) => (listening = resolve));
  const done = main({
    signal: abort.signal,
    env: { DATABASE_URL: db.url, PORT: '0', ...extra },
    onListening: (u) => {
      url = u;
      listening();
    },
  });
  running.push({
    db,
    stop: async () => {
      abort.abort();
      await done;
    },
  });
  await Promise.race([ready, done]);
  return { url, db };
}

describe.each([
  ['examples/http-payments.ts (fetch-style, Hono)', payments.main],
  ['examples/http-express.ts', express.main],
  ['examples/http-fastify.ts', fastify.main],
] as const)('%s', (_name, main) => {
  it('charges once per key and replays the stored answer; tenants do not share keys', async () => {
    const { url, db } = await start(main);
    const key = randomUUID();
    const json = { customerId: 'cus_1', amountCents: 1999 };
    const call = (tenant: string) =>
      idempotentFetch(
        `${url}/charges`,
        { method: 'POST', headers: { 'x-tenant': tenant } },
        { key, json },
      );
    const first = await call('acme');
    const again = await call('acme');
    expect(first.response.status).toBe(201);
    expect(again.replayed).toBe(true);
    const body = await first.response.text();
    expect(await again.response.text()).toBe(body);
    expect(again.response.headers.get('location')).toBe(first.response.headers.get('location'));
    const other = await call('globex');
    expect(other.replayed).toBe(false);
    const { rows } = await db.pool.query<{ tenant: string; n: number }>(
      'SELECT tenant, count(*)::int AS n FROM charges GROUP BY tenant ORDER BY tenant',
    );
    expect(rows).toEqual([
      { tenant: 'acme', n: 1 },
      { tenant: 'globex', n: 1 },
    ]);
    // The same key with another amount is the caller's bug: 422, never a second charge.
    const changed = await idempotentFetch(
      `${url}/charges`,
      { method: 'POST', headers: { 'x-tenant': 'acme' } },
      { key, json: { ...json, amountCents: 1 } },
    );
    expect(changed.response.status).toBe(422);
  });
});

describe('examples/http-webhooks.ts', () => {
  const secrets = { GITHUB_WEBHOOK_SECRET: 'gh-secret', STRIPE_WEBHOOK_SECRET: 'whsec_test' };

  it('applies a GitHub delivery once, signed; refuses a bad signature', async () => {
    const { url, db } = await start(webhooks.main, secrets);
    const id = randomUUID();
    const body = new TextEncoder().encode(JSON.stringify({ action: 'opened' }));
    const send = (signature: string) =>
      fetch(`${url}/webhooks/github`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'x-github-delivery': id,
          'x-github-event': 'issues',
          'x-hub-signature-256': signature,
        },
        body,
      });
    expect((await send('sha256=forged')).status).toBe(401);
    const signature = webhooks.githubSignature('gh-secret', body);
    const first = await send(signature);
    const redelivery = await send(signature);
    expect(first.status).toBe(200);
    expect(redelivery.status).toBe(200);
    expect(redelivery.headers.get('idempotent-replayed')).toBe('true');
    const { rows } = await db.pool.query('SELECT sender, delivery_id, kind FROM events');
    expect(rows).toEqual([{ sender: 'github', delivery_id: id, kind: 'issues' }]);
  });

  it('applies a Stripe event once even when a retry changes pending_webhooks', async () => {
    const { url, db } = await start(webhooks.main, secrets);
    const id = `evt_${randomUUID().replace(/-/g, '')}`;
    const send = (pending: number) => {
      const body = new TextEncoder().encode(
        JSON.stringify({ id, type: 'charge.succeeded', pending_webhooks: pending }),
      );
      const t = Math.floor(Date.now() / 1000);
      return fetch(`${url}/webhooks/stripe`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'stripe-signature': webhooks.stripeSignature('whsec_test', body, t),
        },
        body,
      });
    };
    expect((await send(2)).status).toBe(204);
    const retry = await send(1);
    expect(retry.status).toBe(204);
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    const { rows } = await db.pool.query('SELECT sender, kind FROM events');
    expect(rows).toEqual([{ sender: 'stripe', kind: 'charge.succeeded' }]);
  });
});
