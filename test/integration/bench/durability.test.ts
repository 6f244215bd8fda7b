import { describe, expect, it } from '@jest/globals';
import { durabilitySuffix, ensureDurability } from '../../../bench/durability.js';
import { databaseUrl } from '../../helpers/env.js';

// The test cluster runs fsync = off (kit/services/postgres.ts): for the benches
// it is a server given by DATABASE_URL, which they read and never change.
describe('the benches’ durability check', () => {
  it('refuses a durable run on a server it did not start that does not flush', async () => {
    await expect(ensureDurability(databaseUrl(), 'durable', false)).rejects.toThrow(
      /a durable run needs fsync = on and synchronous_commit = on; .* has fsync = off/,
    );
  });

  it('takes the CPU-bound run there, and reports what the server has', async () => {
    const settings = await ensureDurability(databaseUrl(), 'no-fsync', false);
    expect(settings).toMatchObject({
      durability: 'no-fsync',
      fsync: 'off',
      synchronousCommit: 'on',
    });
  });

  it('turns fsync on and off in a cluster it started, with a reload', async () => {
    try {
      const durable = await ensureDurability(databaseUrl(), 'durable', true);
      expect(durable).toMatchObject({ fsync: 'on', fullPageWrites: 'on', synchronousCommit: 'on' });
    } finally {
      // Back to the test cluster's settings, for the tests that share it.
      const back = await ensureDurability(databaseUrl(), 'no-fsync', true);
      expect(back).toMatchObject({ fsync: 'off', fullPageWrites: 'off' });
    }
  });

  it('names the two modes’ reports apart', () => {
    expect(`latest-http${durabilitySuffix('durable')}`).toBe('latest-http');
    expect(`latest-http${durabilitySuffix('no-fsync')}`).toBe('latest-http-no-fsync');
  });
});
