/**
 * A payment worker in its own process that is killed (SIGKILL: no cleanup, no
 * goodbye) right after its Nth COMMIT, before that message's delete reaches SQS. Its
 * unsent deletes are lost with it and Postgres rolls back its open transactions. The
 * parent reads what it did from JSON lines on stdout, written synchronously so they
 * survive the kill.
 *
 * Env: DEMO_WORKER, DEMO_DATABASE_URL, DEMO_SCHEMA, DEMO_CRASH_AFTER (0: never),
 * DEMO_CONCURRENCY, and the broker's DEMO_* settings (see broker.ts).
 */
import { writeSync } from 'node:fs';
import { startPaymentWorker } from './worker.js';

process.env['AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED'] ??= 'true';

function env(name: string): string {
  const value = process.env[name];
  if (value === undefined) throw new Error(`${name} is not set`);
  return value;
}

function emit(event: Record<string, unknown>): void {
  writeSync(1, `${JSON.stringify(event)}\n`);
}

const crashAfter = Number(env('DEMO_CRASH_AFTER'));
const worker = await startPaymentWorker({
  worker: env('DEMO_WORKER'),
  databaseUrl: env('DEMO_DATABASE_URL'),
  schema: env('DEMO_SCHEMA'),
  broker: Object.fromEntries(
    Object.entries(process.env).filter(
      (e): e is [string, string] => e[0].startsWith('DEMO_') && e[1] !== undefined,
    ),
  ),
  concurrency: Number(env('DEMO_CONCURRENCY')),
  onDelivery: () => emit({ t: 'delivery' }),
});

let commits = 0;
const { consumer } = worker;
consumer.on('duplicate', () => emit({ t: 'duplicate' }));
consumer.on('failed', ({ willRetry }) => willRetry && emit({ t: 'failed' }));
// `processed` fires after COMMIT and before the delete is even queued: the crash point.
consumer.on('processed', ({ key }) => {
  commits += 1;
  emit({ t: 'processed' });
  if (crashAfter > 0 && commits === crashAfter) {
    emit({ t: 'crash', key, commits });
    process.kill(process.pid, 'SIGKILL');
  }
});

process.once('SIGTERM', () => {
  void worker.close().then(() => process.exit(0));
});
emit({ t: 'ready' });
