/**
 * One consumer worker process for the comparison: the contender named by
 * COMPARE_CONTENDER on the queue or topic in COMPARE_CHANNEL. Speaks
 * kit/payments/spawn.ts's stdout protocol (`ready`, `committed`) and reads its
 * EO_HTTP_DATABASE_URL / EO_HTTP_SCHEMA, so bench/compare/supervisor.ts runs it as it
 * runs a payment server; SIGTERM stops it gracefully.
 */
import { emit, env, envPool } from '../../../kit/payments/child-protocol.js';
import type { ChannelEnv } from './channel.js';
import { isConsumerContender } from './contenders.js';
import { startKafkaWorker } from './kafka-workers.js';
import { MessageCrashPoint } from './payments.js';
import { startSqsWorker } from './sqs-workers.js';

const contender = env('COMPARE_CONTENDER');
if (!isConsumerContender(contender)) throw new Error(`unknown consumer contender ${contender}`);
const channel = JSON.parse(env('COMPARE_CHANNEL')) as ChannelEnv;
const db = envPool();
const crash = new MessageCrashPoint(db.pool);

const stop =
  channel.kind === 'sqs'
    ? await startSqsWorker(contender, channel, db, crash)
    : await startKafkaWorker(contender, channel, db, crash);
emit({ t: 'ready', port: 0 });

process.once('SIGTERM', () => {
  void stop()
    .then(() => db.pool.end())
    .then(() => process.exit(0));
});
