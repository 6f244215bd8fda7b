/**
 * A relay in its own process, for the SIGKILL test: relays to EO_OUTBOX_URL from the
 * outbox table in EO_OUTBOX_SCHEMA with a lease of EO_OUTBOX_LEASE_MS, and prints
 * `{"t":"started"}` once it runs. The test kills it mid-publish.
 */
import pg from 'pg';
import { createRelay, httpPublisher } from '../../../src/outbox/index.js';

const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: 4 });
pool.on('error', () => undefined);
const relay = createRelay({
  pool,
  schema: process.env.EO_OUTBOX_SCHEMA,
  owner: 'child',
  leaseMs: Number(process.env.EO_OUTBOX_LEASE_MS),
  publishers: {
    effects: httpPublisher({ url: process.env.EO_OUTBOX_URL!, fetch: { attempts: 1 } }),
  },
});
await relay.start();
process.stdout.write('{"t":"started"}\n');
