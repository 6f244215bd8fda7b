import { randomUUID } from 'node:crypto';
import { describe, expect, it } from '@jest/globals';
import { FRAMEWORKS } from '../../../kit/payments/payments.js';
import { paymentFixture, post } from './support.js';

const fixture = paymentFixture('http_scope_text');

/**
 * The tenant from a JSON claim (as a JWT's payload is): JSON may spell a lone surrogate
 * (`"\ud800"`), which JSON.parse turns into one, and Postgres's UTF-8 cannot hold it.
 */
const claims = (tenant: string): Record<string, string> => ({
  'x-claims': Buffer.from(JSON.stringify({ tenant })).toString('base64url'),
});
const scopeFromClaims = (request: Request): string =>
  (
    JSON.parse(Buffer.from(request.headers.get('x-claims') ?? '', 'base64url').toString()) as {
      tenant: string;
    }
  ).tenant;

const body = { customerId: 'c1', amountCents: 100 };

describe.each(FRAMEWORKS)('%s: scopes are stored as written, or refused', (framework) => {
  it('two tenants differing only in a lone surrogate never share a key: both refused', async () => {
    const server = await fixture.start({ framework, idempotency: { scope: scopeFromClaims } });
    const key = randomUUID();
    const a = await post(`${server.url}/charges`, key, body, claims('acme-\ud800'));
    const b = await post(`${server.url}/charges`, key, body, claims('acme-\ud801'));
    // Tenant B must never get tenant A's answer (both strings become "acme-\ufffd" in
    // Postgres): a scope function returning ill-formed UTF-16 is the server's bug, 500.
    expect(b.headers['idempotent-replayed']).toBeUndefined();
    expect([a.status, b.status]).toEqual([500, 500]);
    expect(await fixture.effects(key)).toBe(0);
  });

  it("a webhook's tenant with a lone surrogate fails the delivery: 500, nothing applied", async () => {
    const server = await fixture.start({ framework, idempotency: { scope: scopeFromClaims } });
    const delivery = randomUUID();
    const response = await fetch(`${server.url}/webhooks/github`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'x-test-signature': 'ok',
        'x-github-delivery': delivery,
        ...claims('acme-\udc00'),
      },
      body: '{"action":"opened"}',
    });
    expect(response.status).toBe(500);
    expect(await fixture.deliveries('github', delivery)).toBe(0);
  });

  it('a scope with surrogate pairs (an emoji) is well-formed and works', async () => {
    const server = await fixture.start({ framework, idempotency: { scope: scopeFromClaims } });
    const key = randomUUID();
    const first = await post(`${server.url}/charges`, key, body, claims('acme-🔑'));
    const again = await post(`${server.url}/charges`, key, body, claims('acme-🔑'));
    const other = await post(`${server.url}/charges`, key, body, claims('acme-🔒'));
    expect([first.status, again.status, other.status]).toEqual([201, 201, 201]);
    expect(JSON.parse(first.body)).toMatchObject({ tenant: 'acme-🔑' });
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(other.headers['idempotent-replayed']).toBeUndefined();
    expect(await fixture.effects(key)).toBe(2);
  });
});
