/**
 * A client the library holds out of an app's pool has its backend terminated while it
 * is held, between two statements (as pg_terminate_backend or a Postgres restart does):
 * the process must live on, the holder must get an error, and the pool must serve the
 * next statement. The app uses its pool before handing it to the library, as apps do
 * (a table created at start-up): the clients it connected then are the ones the library
 * later checks out. An unhandled `error` event on a client ends this process.
 * Prints `held: …` and `next: 1`. Usage: held-client-child.ts <databaseUrl> <scenario>
 */
import pg from 'pg';
import { defineFlow, createFlowRunner } from '../../../src/index.js';
import { acquireClient } from '../../../src/tx/acquire.js';

const [url, scenario] = process.argv.slice(2) as [string, string];

/** The app's pool, with the pool-level listener pg's docs ask for, and nothing else. */
const pool = new pg.Pool({ connectionString: url, max: 2 });
pool.on('error', () => undefined);
// The app's own statements first: both connections exist before the library sees the pool.
await Promise.all([pool.query('SELECT pg_sleep(0.05)'), pool.query('SELECT pg_sleep(0.05)')]);

const side = new pg.Client({ connectionString: url });
side.on('error', () => undefined);
await side.connect();

/** Ends backend `pid` from another session and gives its FATAL time to arrive. */
async function terminate(pid: number): Promise<void> {
  await side.query('SELECT pg_terminate_backend($1)', [pid]);
  await new Promise((resolve) => setTimeout(resolve, 300));
}

async function pidOf(client: pg.ClientBase): Promise<number> {
  const { rows } = await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
  return rows[0]!.pid;
}

switch (scenario) {
  case 'acquire': {
    // What every holder of the library's does: the layer's read-back and cancel, the
    // health probe, pruning, the steps store.
    const client = await acquireClient(pool, 5000, undefined);
    await terminate(await pidOf(client));
    const held = await client.query('SELECT 1').then(
      () => 'answered',
      () => 'rejected',
    );
    client.release(true);
    process.stdout.write(`held: ${held}\n`);
    break;
  }
  case 'steps': {
    // A step's transaction: the client is the library's while the step's work runs.
    const runner = createFlowRunner({ pool });
    const flow = defineFlow('held', async (_input, run) => {
      await run.step('s', async (tx) => terminate(await pidOf(tx)));
      return { status: 200 };
    });
    const outcome = await runner.run(flow, { scope: 's', key: 'k1', input: {} });
    process.stdout.write(`held: ${outcome.kind}\n`);
    break;
  }
  default:
    throw new Error(`no scenario ${scenario}`);
}
const { rows } = await pool.query<{ one: number }>('SELECT 1::int AS one');
process.stdout.write(`next: ${String(rows[0]?.one)}\n`);
await side.end();
await pool.end();
