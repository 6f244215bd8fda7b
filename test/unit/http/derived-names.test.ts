import { describe, expect, it } from '@jest/globals';
import { derivedName } from '../../../src/store/identifiers.js';

const bytes = (name: string): number => Buffer.byteLength(name, 'utf8');
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

describe('derivedName', () => {
  it('keeps a name that fits as it is', () => {
    expect(derivedName('eo_idempotency_keys', '_claim_v1')).toBe('eo_idempotency_keys_claim_v1');
    const fits = 'a'.repeat(63 - '_claim_v1'.length);
    expect(derivedName(fits, '_claim_v1')).toBe(`${fits}_claim_v1`);
  });

  it('truncates a long one and appends a hash of the full name: shared prefixes stay apart', () => {
    const prefix = 'x'.repeat(60);
    const a = derivedName(`${prefix}_alpha`, '_claim_v1');
    const b = derivedName(`${prefix}_bravo`, '_claim_v1');
    expect(a).not.toBe(b);
    for (const name of [a, b]) {
      expect(bytes(name)).toBeLessThanOrEqual(63);
      expect(name.endsWith('_claim_v1')).toBe(true);
    }
    // Deterministic: every instance derives the same name.
    expect(derivedName(`${prefix}_alpha`, '_claim_v1')).toBe(a);
    // Two suffixes of one table stay apart too.
    expect(derivedName(`${prefix}_alpha`, '_store_v1')).not.toBe(a.replace('_claim', '_store'));
  });

  it('one byte over the limit is enough to switch to the hashed form', () => {
    const over = 'a'.repeat(64 - '_idx'.length);
    const name = derivedName(over, '_idx');
    expect(bytes(name)).toBeLessThanOrEqual(63);
    expect(name).toMatch(/^a+_[0-9a-f]{10}_idx$/);
  });

  it('cuts on a character boundary: a multi-byte name never becomes invalid UTF-8', () => {
    const name = derivedName('é'.repeat(40), '_created_at_idx');
    expect(bytes(name)).toBeLessThanOrEqual(63);
    expect(name).not.toContain('\uFFFD');
    expect(Buffer.from(name, 'utf8').toString('utf8')).toBe(name);
    const emoji = derivedName('😀'.repeat(20), '_seq');
    expect(bytes(emoji)).toBeLessThanOrEqual(63);
    expect(emoji).not.toMatch(LONE_SURROGATE);
  });
});
