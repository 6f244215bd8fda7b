import { describe, expect, it } from '@jest/globals';
import {
  canonicalJson,
  fingerprint,
  IdempotencyKeyInvalidError,
  parseIdempotencyKey,
  type FingerprintInput,
} from 'effectively-once/http';

const H = 'Idempotency-Key';

describe('parseIdempotencyKey', () => {
  it('is undefined without the header', () => {
    expect(parseIdempotencyKey(null, H)).toBeUndefined();
  });

  it('accepts the raw token and the draft’s sf-string as the same key', () => {
    expect(parseIdempotencyKey('8e03978e-40d5-43e8-bc93-6894a57f9324', H)).toBe(
      '8e03978e-40d5-43e8-bc93-6894a57f9324',
    );
    expect(parseIdempotencyKey('"8e03978e-40d5-43e8-bc93-6894a57f9324"', H)).toBe(
      '8e03978e-40d5-43e8-bc93-6894a57f9324',
    );
    expect(parseIdempotencyKey('  abc  ', H)).toBe('abc');
  });

  it('unescapes \\" and \\\\ inside a quoted key, keeps spaces', () => {
    expect(parseIdempotencyKey('"a \\"b\\" \\\\c"', H)).toBe('a "b" \\c');
  });

  it.each([
    ['', 'empty'],
    ['""', 'empty'],
    ['"abc', 'not closed'],
    ['"ab"c', 'nothing after'],
    ['"a\\nb"', 'escape'],
    ['ключ', 'printable ASCII'],
    ['a\u0000b', 'printable ASCII'],
    ['a\ud800b', 'printable ASCII'],
    ['"\udc00"', 'printable ASCII'],
  ])('refuses %j (%s)', (value, problem) => {
    expect(() => parseIdempotencyKey(value, H)).toThrow(IdempotencyKeyInvalidError);
    expect(() => parseIdempotencyKey(value, H)).toThrow(new RegExp(problem));
  });

  it('allows 255 characters by default, and maxLength when given', () => {
    expect(parseIdempotencyKey('k'.repeat(255), H)).toHaveLength(255);
    expect(() => parseIdempotencyKey('k'.repeat(256), H)).toThrow(/256 characters/);
    expect(() => parseIdempotencyKey('k'.repeat(11), H, 10)).toThrow(IdempotencyKeyInvalidError);
    expect(new IdempotencyKeyInvalidError(H, 'x').code).toBe('EO_IDEMPOTENCY_KEY_INVALID');
  });
});

describe('fingerprint', () => {
  const base: FingerprintInput = {
    method: 'POST',
    route: '/charges',
    search: '',
    body: Buffer.from('{"a":1,"b":2}'),
    contentType: 'application/json',
  };

  it('is a sha256 that changes with method, route, query and body', () => {
    const fp = fingerprint(base);
    expect(fp).toHaveLength(32);
    expect(fingerprint({ ...base }).equals(fp)).toBe(true);
    for (const change of [
      { method: 'PATCH' },
      { route: '/refunds' },
      { search: '?dry=1' },
      { body: Buffer.from('{"a":1,"b":3}') },
    ])
      expect(fingerprint({ ...base, ...change }).equals(fp)).toBe(false);
  });

  it('frames its parts: moving bytes between route and query is another request', () => {
    const a = fingerprint({ ...base, route: '/ab', search: '?c' });
    const b = fingerprint({ ...base, route: '/a', search: 'b?c' });
    expect(a.equals(b)).toBe(false);
  });

  it("'raw' tells reformatted JSON apart; 'json' does not", () => {
    const spaced = { ...base, body: Buffer.from('{ "b": 2, "a": 1 }') };
    expect(fingerprint(spaced).equals(fingerprint(base))).toBe(false);
    expect(fingerprint(spaced, 'json').equals(fingerprint(base, 'json'))).toBe(true);
    // Not JSON (by type or by content): the raw bytes count.
    const text = { ...base, contentType: 'text/plain' };
    expect(fingerprint(text, 'json').equals(fingerprint(text, 'raw'))).toBe(true);
    const broken = { ...base, body: Buffer.from('{nope') };
    expect(fingerprint(broken, 'json').equals(fingerprint(broken, 'raw'))).toBe(true);
  });

  it('a function chooses what of the body is hashed', () => {
    const ignoreBody = () => '';
    const other = { ...base, body: Buffer.from('anything') };
    expect(fingerprint(other, ignoreBody).equals(fingerprint(base, ignoreBody))).toBe(true);
    expect(
      fingerprint(base, ignoreBody).equals(fingerprint({ ...base, route: '/x' }, ignoreBody)),
    ).toBe(false);
  });

  it('canonicalJson sorts keys at every level', () => {
    expect(canonicalJson('{"b":[{"d":1,"c":2}],"a":null}')).toBe('{"a":null,"b":[{"c":2,"d":1}]}');
  });
});
