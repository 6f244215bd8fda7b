/**
 * A RabbitMQ consumer in its own process, for the test that SIGKILLs one after a COMMIT
 * and before its ack: consumes EO_QUEUE into EO_SCHEMA's `effects` (prefetch 1) and,
 * once EO_KILL_AFTER messages were processed, kills itself from the `processed` event,
 * which the consumer emits after the COMMIT and before it acks.
 */
import pg from 'pg';
import { createConsumer } from '../../../src/index.js';
import { rabbitmqSource } from '../../../adapters/rabbitmq/index.js';
import { recordEffect, type Job } from './effects.js';

const killAfter = Number(process.env['EO_KILL_AFTER']);
const pool = new pg.Pool({
  connectionString: process.env['DATABASE_URL'],
  options: `-c search_path=${process.env['EO_SCHEMA']}`,
});
pool.on('error', () => undefined);
const consumer = createConsumer<Job>({
  name: 'rmq-it',
  pool,
  schema: process.env['EO_SCHEMA'],
  source: rabbitmqSource<Job>({
    url: process.env['RABBITMQ_URL']!,
    queue: process.env['EO_QUEUE']!,
    prefetch: 1,
  }),
  handler: async (job, ctx) => {
    await recordEffect(ctx.tx, job.id, 'child', ctx.attempt);
  },
});
let processed = 0;
consumer.on('processed', ({ key }) => {
  process.stdout.write(`${JSON.stringify({ t: 'processed', key })}\n`);
  if (++processed === killAfter) process.kill(process.pid, 'SIGKILL');
});
await consumer.start();
