/**
 * Runs child-app.ts's application on EO_NEST_PLATFORM (express | fastify), as a Nest
 * app's main.ts does (NestFactory, rawBody, enableShutdownHooks), and prints:
 * `listening <port>`, `committed <key>` (a request's COMMIT, before its answer),
 * `handling <id>` / `processed <key>` (a delivery's effect, then its COMMIT, before its
 * ack), `closed` (at onApplicationShutdown, the last hook; Nest then re-raises the signal). EO_NEST_KILL=http|consumer SIGKILLs it
 * at the first such COMMIT, before the answer or the ack.
 */
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { ExpressAdapter } from '@nestjs/platform-express';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import pg from 'pg';
import {
  EffectivelyOnceConsumers,
  EffectivelyOnceModule,
  type EffectivelyOnceModuleOptions,
} from '../../../adapters/nestjs/index.js';
import { sqsSource } from '../../../adapters/sqs/index.js';
import { testSqsClient } from '../../helpers/sqs.js';
import {
  ChargesController,
  JobHandlers,
  REPORTER,
  say,
  ShutdownReporter,
  type Job,
} from './child-app.js';

const env = (name: string): string | undefined => process.env[name] || undefined;
const kill = env('EO_NEST_KILL');
const queueUrl = env('EO_NEST_QUEUE_URL');
const pool = new pg.Pool({
  connectionString: env('EO_NEST_DATABASE_URL'),
  options: `-c search_path=${env('EO_NEST_SCHEMA')}`,
  max: 20,
});
pool.on('error', () => undefined);

const options: EffectivelyOnceModuleOptions = {
  pool,
  stopTimeoutMs: 20_000,
  http: {
    scope: 'nest-child',
    lockTimeoutMs: 20_000,
    onCommitted: ({ key }) => {
      say(`committed ${key}`);
      if (kill === 'http') process.kill(process.pid, 'SIGKILL');
    },
  },
  ...(queueUrl === undefined
    ? {}
    : {
        consumers: {
          jobs: {
            source: sqsSource<Job>({
              client: testSqsClient(),
              queueUrl,
              waitTimeSeconds: 1,
            }),
            backoff: { initialMs: 50, maxMs: 200 },
          },
        },
      }),
};

@Module({
  imports: [EffectivelyOnceModule.forRoot(options)],
  controllers: [ChargesController],
  // The handler only with its consumer: a @OnceHandler naming no consumer is refused.
  providers: [
    ...(queueUrl === undefined ? [] : [JobHandlers]),
    { provide: REPORTER, useValue: say },
    ShutdownReporter,
  ],
})
class AppModule {}

const app = await NestFactory.create(
  AppModule,
  env('EO_NEST_PLATFORM') === 'fastify' ? new FastifyAdapter() : new ExpressAdapter(),
  { rawBody: true, logger: ['error'] },
);
app.enableShutdownHooks();
await app.listen(Number(env('EO_NEST_PORT') ?? 0), '127.0.0.1');
const address = app.getHttpServer().address() as { port: number };
if (queueUrl !== undefined) {
  const jobs = app.get(EffectivelyOnceConsumers).get('jobs');
  jobs.on('processed', ({ key }) => {
    say(`processed ${key}`);
    // Synchronous in the event: the COMMIT is behind, the ack not yet sent.
    if (kill === 'consumer') process.kill(process.pid, 'SIGKILL');
  });
}
say(`listening ${address.port}`);
