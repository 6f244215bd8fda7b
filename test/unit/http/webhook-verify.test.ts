import { afterAll, describe, expect, it } from '@jest/globals';
import Fastify from 'fastify';
import pg from 'pg';
import {
  ConfigurationError,
  createIdempotency,
  webhookSources,
  type WebhookOptions,
} from 'effectively-once/http';
import { expressWebhook, idempotentExpress } from 'effectively-once/http/express';
import { idempotencyPlugin } from 'effectively-once/http/fastify';

// Never connects: the options are checked when the receiver is made.
const pool = new pg.Pool({ host: '127.0.0.1', port: 1 });
const idempotency = createIdempotency({ pool, scope: 'public', migrate: false, retention: false });
afterAll(async () => {
  await idempotency.close();
  await pool.end();
});

const unverified = { source: webhookSources.github } as unknown as WebhookOptions;
const noop = async (): Promise<void> => undefined;

describe('a webhook receiver must say how deliveries are verified', () => {
  it('without verify: a ConfigurationError naming webhook.verify, on every door', async () => {
    expect(() => idempotency.webhook(unverified, noop)).toThrow(ConfigurationError);
    expect(() => idempotency.webhook(unverified, noop)).toThrow(/webhook\.verify.*verify: false/);
    expect(() => expressWebhook(idempotency, unverified, noop)).toThrow(ConfigurationError);
    expect(() => idempotentExpress(idempotency, noop, { webhook: unverified })).toThrow(
      ConfigurationError,
    );
    const app = Fastify();
    await app.register(idempotencyPlugin, { idempotency });
    expect(() =>
      app.post('/hook', { config: { idempotency: { webhook: unverified } } }, async () => ({})),
    ).toThrow(ConfigurationError);
    await app.close();
  });

  it('verify: false opts out explicitly; a function is taken; anything else is refused', () => {
    expect(() =>
      idempotency.webhook({ source: webhookSources.github, verify: false }, noop),
    ).not.toThrow();
    expect(() =>
      idempotency.webhook({ source: webhookSources.github, verify: () => true }, noop),
    ).not.toThrow();
    const truthy = { source: webhookSources.github, verify: true } as unknown as WebhookOptions;
    expect(() => idempotency.webhook(truthy, noop)).toThrow(ConfigurationError);
  });
});
