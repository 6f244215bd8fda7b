import { describe, expect, it } from '@jest/globals';
import { InvalidKeyError, MAX_KEY_BYTES, ConfigurationError } from '../../../src/index.js';
import { resolveBackoff } from '../../../src/backoff.js';
import { validateKey } from '../../../src/keys.js';
import { quoteIdentifier } from '../../../src/store/identifiers.js';

describe('validateKey', () => {
  it('accepts keys up to the limit and rejects the rest with InvalidKeyError', () => {
    expect(validateKey('a'.repeat(255), 255)).toHaveLength(255);
    expect(validateKey('ключ 🔑', 255)).toBe('ключ 🔑');
    for (const bad of [undefined, '', 'a'.repeat(256), 'a\u0000b', 'x\uD800y']) {
      expect(() => validateKey(bad, 255)).toThrow(InvalidKeyError);
    }
    // Within the character limit but beyond what the unique index can hold.
    expect(validateKey('k'.repeat(MAX_KEY_BYTES), 8192)).toHaveLength(MAX_KEY_BYTES);
    expect(() => validateKey('k'.repeat(MAX_KEY_BYTES + 1), 8192)).toThrow('UTF-8 bytes');
    expect(() => validateKey('ключ'.repeat(300), 8192)).toThrow(InvalidKeyError); // 1200 chars, 2400 bytes
  });
});

describe('quoteIdentifier', () => {
  it('doubles embedded quotes and rejects names Postgres would truncate or cannot store', () => {
    expect(quoteIdentifier('plain')).toBe('"plain"');
    expect(quoteIdentifier('a"b c')).toBe('"a""b c"');
    expect(() => quoteIdentifier('')).toThrow(ConfigurationError);
    expect(() => quoteIdentifier('x'.repeat(64))).toThrow(ConfigurationError);
    expect(() => quoteIdentifier('a\u0000')).toThrow(ConfigurationError);
  });
});

describe('resolveBackoff', () => {
  it('grows exponentially up to maxMs, with jitter staying inside the window', () => {
    const exact = resolveBackoff({ initialMs: 100, maxMs: 1000, factor: 2, jitter: false });
    expect([1, 2, 3, 4, 5, 6].map(exact)).toEqual([100, 200, 400, 800, 1000, 1000]);
    const jittered = resolveBackoff({ initialMs: 100, maxMs: 1000 });
    for (let i = 0; i < 200; i++) {
      const d = jittered(3);
      expect(d).toBeGreaterThanOrEqual(0);
      expect(d).toBeLessThanOrEqual(400);
    }
    expect(resolveBackoff((n) => n * 7)(3)).toBe(21);
  });
});
