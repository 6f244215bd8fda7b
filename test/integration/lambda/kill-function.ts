/**
 * A Lambda function's module for the kill tests, run by kit/lambda's ChildInvoker in its
 * own process: the pool and the handler at module scope, as Lambda's docs say. It kills
 * its own process (SIGKILL: no cleanup, as a runtime killed at a timeout or by an OOM)
 * once per run, where EO_KILL_AT says:
 * - `handler`: in the handler after the effect's INSERT, before the COMMIT (mid-batch);
 * - `after-commit`: at the first `processed` event, after a COMMIT, before the answer.
 * EO_KILL_MARKER is a file created at the kill, so the next environment does not kill.
 */
import fs from 'node:fs';
import pg from 'pg';
import { lambdaConsumer } from '../../../adapters/lambda/index.js';

const killAt = process.env['EO_KILL_AT'];
const marker = process.env['EO_KILL_MARKER']!;
const pool = new pg.Pool(JSON.parse(process.env['EO_LAMBDA_PG']!) as pg.PoolConfig);
// An idle connection dropped while the environment was frozen must not crash it.
pool.on('error', () => undefined);

function killOnce(): void {
  if (fs.existsSync(marker)) return;
  fs.writeFileSync(marker, String(process.pid));
  process.kill(process.pid, 'SIGKILL');
}

export const handler = lambdaConsumer({
  name: 'lambda-kill',
  pool,
  schema: process.env['EO_LAMBDA_SCHEMA']!,
  concurrency: 3,
  handler: async (record, ctx) => {
    const { id } = JSON.parse(record.body) as { id: string };
    await ctx.tx.query('INSERT INTO effects (id, attempt) VALUES ($1, $2)', [id, ctx.attempt]);
    if (killAt === 'handler' && id === 'k3') killOnce();
  },
});

if (killAt === 'after-commit') handler.consumer.on('processed', () => killOnce());
