/**
 * The pure rules of steps: the key an outside call sends its provider (derivedKey), and
 * which failures end a flow with a stored answer by default (defaultFinalError).
 */
import { describe, expect, it } from '@jest/globals';
import { defaultFinalError, derivedKey } from '../../../src/index.js';

describe('derivedKey', () => {
  const base = ['tenant', 'order-42', 'charge', 'charge'] as const;

  it('is pinned: a provider deduplicates on it across deploys, so it never changes', () => {
    // sha256 over each part's UTF-8 bytes behind a 4-byte big-endian length, base64url.
    // Changing it would make every flow in flight charge again after a deploy.
    expect(derivedKey(...base)).toBe('eo_N06pfsPHZIxAkoeR33i5wVIo8Ll_WH9hhIThMBDybLQ');
  });

  it('is the same on every call, and fits a provider’s key limits whatever the key’s length', () => {
    expect(derivedKey(...base)).toBe(derivedKey(...base));
    for (const key of ['k', 'x'.repeat(10_000), '🦆 ключ'])
      expect(derivedKey('s', key, 'f', 'step')).toMatch(/^eo_[A-Za-z0-9_-]{43}$/);
  });

  it('differs when any one part differs', () => {
    const keys = new Set([
      derivedKey(...base),
      derivedKey('tenant2', 'order-42', 'charge', 'charge'),
      derivedKey('tenant', 'order-43', 'charge', 'charge'),
      derivedKey('tenant', 'order-42', 'refund', 'charge'),
      derivedKey('tenant', 'order-42', 'charge', 'refund'),
    ]);
    expect(keys.size).toBe(5);
  });

  it('separates flows tables other than the default, and leaves the default’s keys as they were', () => {
    expect(derivedKey(...base, { schema: 'public', table: 'eo_flows' })).toBe(derivedKey(...base));
    const keys = new Set([
      derivedKey(...base),
      derivedKey(...base, { table: 'b_flows' }),
      derivedKey(...base, { schema: 'app' }),
      derivedKey(...base, { schema: 'app', table: 'b_flows' }),
    ]);
    expect(keys.size).toBe(4);
  });

  it('keeps the parts apart: moving a boundary between them gives another key', () => {
    // Without the length prefixes these would hash the same bytes.
    expect(derivedKey('ab', 'c', 'f', 's')).not.toBe(derivedKey('a', 'bc', 'f', 's'));
    expect(derivedKey('s', 'k', 'flow', 'step')).not.toBe(derivedKey('s', 'k', 'flows', 'tep'));
    expect(derivedKey('s', '', 'k', 'f')).not.toBe(derivedKey('s', 'k', '', 'f'));
  });
});

describe('defaultFinalError', () => {
  const withStatus = (status: unknown, field: 'status' | 'statusCode' = 'status') =>
    Object.assign(new Error(`provider said ${String(status)}`), { [field]: status });

  it('makes a 4xx the flow’s stored answer: that status, a problem body naming the step', () => {
    expect(defaultFinalError(withStatus(402), 'charge')).toEqual({
      status: 402,
      headers: { 'content-type': 'application/problem+json' },
      body: {
        type: 'about:blank',
        title: 'The step failed',
        status: 402,
        step: 'charge',
        detail: 'provider said 402',
      },
    });
    expect(defaultFinalError(withStatus(404, 'statusCode'), 'lookup')).toMatchObject({
      status: 404,
      body: { step: 'lookup' },
    });
    // Not an Error: the detail is what it turns into as a string.
    expect(defaultFinalError({ status: 400 }, 'x')).toMatchObject({
      status: 400,
      body: { detail: '[object Object]' },
    });
  });

  it.each([408, 409, 425, 429])('leaves %i transient: a retry may turn it around', (status) => {
    expect(defaultFinalError(withStatus(status), 'charge')).toBeUndefined();
  });

  it.each([
    ['a 5xx', withStatus(503)],
    ['a 3xx', withStatus(302)],
    ['a status that is not an integer', withStatus(402.5)],
    ['a status given as text', withStatus('402')],
    ['an error without a status (network, timeout, SQL)', new Error('ECONNRESET')],
    ['a thrown string', 'boom'],
    ['null', null],
    ['undefined', undefined],
  ])('leaves %s transient', (_name, error) => {
    expect(defaultFinalError(error, 'charge')).toBeUndefined();
  });

  it('reads `status` before `statusCode`', () => {
    const both = Object.assign(new Error('x'), { status: 503, statusCode: 402 });
    expect(defaultFinalError(both, 'charge')).toBeUndefined();
  });
});
