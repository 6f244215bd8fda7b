/**
 * The steps chaos server process: the chaos flow (flow.ts) behind `POST /orders` on
 * Express or Fastify, through effectively-once/http's steps door, with the completer
 * running in the background. It speaks kit/payments/child.ts's stdout protocol (the HTTP
 * target's supervisor runs it with `entry`): `ready` once listening, `committed` at each
 * flow boundary (a step committed, a provider answer not yet recorded), `completer`
 * (`n` flows its completer finished in a pass), and the armed SIGKILL right after the
 * Nth boundary.
 *
 * Env: those of kit/payments/child.ts, and EO_STEPS_PROVIDER_URL, EO_STEPS_LEASE_MS,
 * EO_STEPS_CALL_TIMEOUT_MS.
 */
import pg from 'pg';
import { createStepsCompleter } from 'effectively-once';
import { createIdempotency } from 'effectively-once/http';
import { emit, env } from '../../kit/payments/child-protocol.js';
import { sleep } from '../../src/sleep.js';
import type { StepsFramework } from './args.js';
import { serveSteps } from './door.js';
import { chaosOrderFlow } from './flow.js';

const schema = env('EO_HTTP_SCHEMA');
const pool = new pg.Pool({
  connectionString: env('EO_HTTP_DATABASE_URL'),
  options: `-c search_path=${schema}`,
  max: 20,
});
pool.on('error', () => undefined);
const killAfter = Number(env('EO_HTTP_KILL_AFTER_COMMITS', '0'));
const leaseMs = Number(env('EO_STEPS_LEASE_MS'));
let boundaries = 0;
const flow = chaosOrderFlow({
  providerUrl: env('EO_STEPS_PROVIDER_URL'),
  callTimeoutMs: Number(env('EO_STEPS_CALL_TIMEOUT_MS')),
  boundary: (point, key) => {
    boundaries++;
    emit({ t: 'committed', key: `${key}:${point}` });
    // The crash point: a step committed or a provider answer unrecorded; nothing after it runs.
    if (killAfter > 0 && boundaries === killAfter) process.kill(process.pid, 'SIGKILL');
  },
});
const idempotency = createIdempotency({ pool, schema, scope: 'chaos' });
const server = await serveSteps(
  env('EO_HTTP_FRAMEWORK') as StepsFramework,
  idempotency,
  flow,
  { leaseMs },
  Number(env('EO_HTTP_PORT', '0')),
);
// Flows nobody comes back for: looked for every second, taken over once their lease
// expired. Its passes run here (runOnce), not by start(), to report what each finished:
// a `completer` line per pass that drove flows to their answer, for the summary.
const completer = createStepsCompleter({ pool, schema, flows: [flow], leaseMs });
const stopping = new AbortController();
const completing = (async () => {
  while (!stopping.signal.aborted) {
    const n = await completer.runOnce(stopping.signal).catch(() => 0);
    if (n > 0) emit({ t: 'completer', n });
    await sleep(1000, stopping.signal);
  }
})();
emit({ t: 'ready', port: server.port });

const stop = (): void => {
  setTimeout(() => process.exit(0), 5000).unref();
  stopping.abort();
  void Promise.all([server.close(), completing])
    .then(() => idempotency.close({ timeoutMs: 1000 }))
    .then(() => pool.end())
    .then(() => process.exit(0));
};
process.once('SIGTERM', stop);
process.once('SIGINT', stop);
