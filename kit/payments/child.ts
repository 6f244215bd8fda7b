/**
 * The payment API (payments.ts) in a process of its own, for tests that kill it. It
 * prints JSON lines on stdout, written synchronously so they survive a SIGKILL:
 * `{"t":"ready","port":…}` once listening, `{"t":"committed","key":…,"status":…}`
 * after each COMMIT (before the response is handed to the framework).
 *
 * Env: EO_HTTP_FRAMEWORK (hono | express | fastify), EO_HTTP_DATABASE_URL,
 * EO_HTTP_SCHEMA (tables and key table live there), EO_HTTP_PORT (default 0),
 * EO_HTTP_KILL_AFTER_COMMITS (N > 0: SIGKILL itself right after the Nth COMMIT, before
 * that response is written; default 0, never).
 */
import { emit, env, envPool } from './child-protocol.js';
import { startPaymentServer, type Framework } from './payments.js';

const { pool, schema } = envPool();
const killAfter = Number(env('EO_HTTP_KILL_AFTER_COMMITS', '0'));
let commits = 0;
const server = await startPaymentServer({
  framework: env('EO_HTTP_FRAMEWORK') as Framework,
  pool,
  schema,
  port: Number(env('EO_HTTP_PORT', '0')),
  idempotency: {
    onCommitted: ({ key, status }) => {
      commits++;
      emit({ t: 'committed', key, status });
      // The crash point: committed, nothing sent. No cleanup runs, no goodbye.
      if (killAfter > 0 && commits === killAfter) process.kill(process.pid, 'SIGKILL');
    },
  },
});
emit({ t: 'ready', port: server.port });

const stop = (): void => {
  void server
    .close()
    .then(() => pool.end())
    .then(() => process.exit(0));
};
process.once('SIGTERM', stop);
process.once('SIGINT', stop);
