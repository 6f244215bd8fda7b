import { describe, expect, it } from '@jest/globals';
import { drizzle as nodePostgres } from 'drizzle-orm/node-postgres';
import type { PgDatabase, PgQueryResultHKT } from 'drizzle-orm/pg-core';
import { drizzle as postgresJs } from 'drizzle-orm/postgres-js';
import { drizzleLayer } from '../../../adapters/drizzle/index.js';
import { ConfigurationError } from '../../../src/errors.js';

describe('drizzleLayer', () => {
  it('takes a database over node-postgres or postgres.js', () => {
    expect(drizzleLayer(nodePostgres.mock()).name).toBe('drizzle');
    expect(drizzleLayer(postgresJs.mock()).name).toBe('drizzle');
  });

  it("refuses another driver's, whose COMMIT and connection it does not know", () => {
    // Another driver's session class, as Drizzle's other pg drivers have their own.
    class NeonSession {}
    const other = {
      _: { session: new NeonSession() },
    } as unknown as PgDatabase<PgQueryResultHKT>;
    expect(() => drizzleLayer(other)).toThrow(ConfigurationError);
  });
});
