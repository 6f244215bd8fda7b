/**
 * The completer on a database that never saw a flow: `runOnce()` (a job's way to finish
 * abandoned flows) migrates the flows table as `run` does, instead of rejecting with
 * "relation … does not exist" until some door happened to migrate it first.
 */
import { describe, expect, it } from '@jest/globals';
import { createStepsCompleter, defineFlow } from 'effectively-once';
import { createTestDatabase } from '../../helpers/db.js';

describe('steps: the completer on a fresh database', () => {
  it('runOnce migrates the flows table and finds nothing to finish', async () => {
    const db = await createTestDatabase('steps_completer_fresh');
    const flow = defineFlow('noop', () => Promise.resolve({ status: 204 }));
    const completer = createStepsCompleter({ pool: db.pool, schema: db.schema, flows: [flow] });
    try {
      await expect(completer.runOnce()).resolves.toBe(0);
      const { rows } = await db.pool.query<{ n: string }>(
        `SELECT count(*)::text AS n FROM ${db.table('eo_flows')}`,
      );
      expect(rows).toEqual([{ n: '0' }]);
    } finally {
      await completer.stop();
      await db.close();
    }
  });
});
