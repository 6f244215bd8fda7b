import { afterAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { effectivelyOnceFailures } from '../../bench/compare/report.js';
import { runContender, type ScenarioOptions } from '../../bench/compare/scenario.js';
import { databaseUrl } from '../helpers/env.js';

// `npm run compare` in small: one payment killed right after its charge's COMMIT, one
// whose answer is dropped, and 4 identical requests at once. The peer run is the
// negative control: the same crash point must double its charge, or the comparison's
// zeros for effectively-once would prove nothing.
const pool = new pg.Pool({ connectionString: databaseUrl(), max: 4 });
const options: ScenarioOptions = {
  pool,
  databaseUrl: databaseUrl(),
  runId: `smoke${Date.now().toString(36)}`,
  payments: 5,
  concurrent: 4,
  log: () => undefined,
};

afterAll(() => pool.end());

describe('npm run compare (smoke)', () => {
  it('effectively-once: the kill lands after COMMIT, no double, no stuck key', async () => {
    const result = await runContender('effectively-once', options);
    expect(result.kills).toBe(1);
    expect(effectivelyOnceFailures(result)).toEqual([]);
  });

  it('express-idempotency in memory: the same kill doubles the charge', async () => {
    const result = await runContender('express-idempotency/memory', options);
    expect(result.kills).toBe(1);
    expect(result.killed).toMatchObject({ payments: 1, doubles: 1, stuck: 0 });
    expect(result.twoProcesses.charges).toBe(2);
  });
});
