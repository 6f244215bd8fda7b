/**
 * The steps server (server.ts) in a process of its own, for tests that kill it. Prints
 * `{"t":"ready","port":…}` once listening and `{"t":"at","point":…,"key":…}` when it
 * reaches a boundary (kit/payments/child-protocol.ts's lines). Env: EO_STEPS_FRAMEWORK,
 * EO_HTTP_DATABASE_URL, EO_HTTP_SCHEMA, EO_STEPS_PROVIDER_URL, EO_STEPS_LEASE_MS,
 * EO_HTTP_PORT, EO_STEPS_KILL_AT (a point of charge.ts's CHARGE_POINTS, or before-answer:
 * SIGKILL itself there, once), EO_STEPS_HOLD_AT (the flow's points: stop there forever,
 * for a test that SIGSTOPs or outwaits it).
 */
import { emit, env, envPool } from '../payments/child-protocol.js';
import { CHARGE_POINTS, type ChargeHooks } from './charge.js';
import { startStepsServer, type StepsFramework } from './server.js';

const { pool, schema } = envPool();
const killAt = env('EO_STEPS_KILL_AT', '');
const holdAt = env('EO_STEPS_HOLD_AT', '');

/** What the process does at a boundary: say so, then die or hang if told to. */
const at =
  (point: string) =>
  async (key: string): Promise<void> => {
    emit({ t: 'at', point, key });
    if (killAt === point) process.kill(process.pid, 'SIGKILL');
    if (holdAt === point) await new Promise(() => undefined);
  };
const hooks: ChargeHooks = {};
for (const [point, hook] of Object.entries(CHARGE_POINTS)) hooks[hook] = at(point);

const server = await startStepsServer({
  framework: env('EO_STEPS_FRAMEWORK', 'web') as StepsFramework,
  pool,
  schema,
  providerUrl: env('EO_STEPS_PROVIDER_URL'),
  hooks,
  leaseMs: Number(env('EO_STEPS_LEASE_MS', '30000')),
  port: Number(env('EO_HTTP_PORT', '0')),
  beforeAnswer: (status) => {
    emit({ t: 'answer', status });
    emit({ t: 'at', point: 'before-answer', key: '' });
    if (killAt === 'before-answer') process.kill(process.pid, 'SIGKILL');
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
