import { describe, expect, it } from '@jest/globals';
import * as core from '../../../src/index.js';
import * as errors from '../../../src/errors.js';

describe('the public API of effectively-once', () => {
  it('exports every error class of src/errors.ts, so users can match them with instanceof', () => {
    const classes = Object.entries(errors).filter(
      ([, value]) =>
        typeof value === 'function' &&
        (value === errors.EffectivelyOnceError ||
          value.prototype instanceof errors.EffectivelyOnceError),
    );
    expect(classes.length).toBeGreaterThan(10);
    const exported = core as Record<string, unknown>;
    expect(classes.filter(([name, value]) => exported[name] !== value).map(([n]) => n)).toEqual([]);
  });

  it('does not export internal helpers (they collide with test runners and editors)', () => {
    for (const name of [
      'describe',
      'quoteIdentifier',
      'qualifiedTable',
      'resolveBackoff',
      'payloadHash',
      'validateKey',
    ]) {
      expect(Object.keys(core)).not.toContain(name);
    }
  });
});
