import { randomUUID } from 'node:crypto';
import { describe, expect, it } from '@jest/globals';
import { FRAMEWORKS } from '../../../kit/payments/payments.js';
import { paymentFixture, post } from './support.js';

const fixture = paymentFixture('http_json_fingerprint');

describe.each(FRAMEWORKS)("%s: fingerprint 'json' against a real server", (framework) => {
  it.each([
    [
      'an amount past 2^53',
      '{"customerId":"c","amountCents":9007199254740993}',
      '{"customerId":"c","amountCents":9007199254740992}',
    ],
    [
      'a key given twice',
      '{"customerId":"alice","customerId":"mallory","amountCents":1}',
      '{"customerId":"mallory","amountCents":1}',
    ],
  ])('the key reused with %s is 422, not a replay', async (_what, first, second) => {
    const server = await fixture.start({ framework, idempotency: { fingerprint: 'json' } });
    const key = randomUUID();
    const original = await post(`${server.url}/charges`, key, first);
    expect(original.status).toBe(201);
    const reused = await post(`${server.url}/charges`, key, second);
    expect(reused.status).toBe(422);
    expect(JSON.parse(reused.body)).toMatchObject({ code: 'EO_IDEMPOTENCY_KEY_REUSED' });
    expect(await fixture.effects(key)).toBe(1);
    // The same request again (byte for byte) is a replay.
    const again = await post(`${server.url}/charges`, key, first);
    expect(again).toMatchObject({ status: 201, body: original.body });
    expect(again.headers['idempotent-replayed']).toBe('true');
  });

  it('reordered and re-spaced, a request is still the same one', async () => {
    const server = await fixture.start({ framework, idempotency: { fingerprint: 'json' } });
    const key = randomUUID();
    const original = await post(`${server.url}/charges`, key, '{"customerId":"c","amountCents":7}');
    const again = await post(
      `${server.url}/charges`,
      key,
      '{ "amountCents" : 7,\n "customerId" : "c" }',
    );
    expect(again).toMatchObject({ status: 201, body: original.body });
    expect(again.headers['idempotent-replayed']).toBe('true');
  });
});
