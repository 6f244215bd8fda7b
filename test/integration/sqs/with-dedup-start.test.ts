/**
 * Issue 11: a database blip during withDedup's first start (the migrate the first
 * message triggers) must not leave the worker failing every later message: the next
 * message starts it again. Real sqs-consumer over ElasticMQ; the worker's pool goes
 * through a TCP proxy that is down for the first message only.
 */
import { afterEach, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { Consumer } from 'sqs-consumer';
import type { Message } from '@aws-sdk/client-sqs';
import { withDedup } from '../../../adapters/sqs/index.js';
import { FaultProxy } from '../../../kit/fault-proxy.js';
import { databaseUrl } from '../../helpers/env.js';
import { waitFor } from '../../helpers/wait-for.js';
import { TIMEOUT, recordEffect, sqsIntegration } from './harness.js';

const it_ = sqsIntegration('with_dedup_start');
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn();
});

describe('withDedup: a failed first start', () => {
  it(
    'is retried by the next message instead of failing every message after it',
    async () => {
      const { url } = await it_.queues.create('dedup-start', { visibilityTimeout: 1 });
      await it_.queues.send(url, JSON.stringify({ id: 'after-blip' }), {
        MessageAttributes: { 'Idempotency-Key': { DataType: 'String', StringValue: 'blip-1' } },
      });

      const target = new URL(databaseUrl());
      const proxy = await FaultProxy.create({
        target: { host: target.hostname, port: Number(target.port) },
      });
      cleanups.push(() => proxy.down());
      target.port = String(proxy.port);
      const pool = new pg.Pool({
        connectionString: target.toString(),
        options: `-c search_path=${it_.db.schema}`,
        connectionTimeoutMillis: 2000,
      });
      pool.on('error', () => undefined);
      cleanups.push(() => pool.end().catch(() => undefined));

      const worker = withDedup(
        async (message, ctx) => {
          const { id } = JSON.parse(message.Body!) as { id: string };
          await recordEffect(ctx.tx, id, 'blip', ctx.attempt, null);
        },
        {
          name: 'dedup-start',
          pool,
          schema: it_.db.schema,
          key: 'Idempotency-Key',
          client: it_.queues.client,
          queueUrl: url,
          backoff: () => 0,
        },
      );
      cleanups.push(() => worker.stop({ timeoutMs: 2000 }));
      const failures: unknown[] = [];
      const app = Consumer.create({
        queueUrl: url,
        sqs: it_.queues.client,
        waitTimeSeconds: 1,
        messageAttributeNames: ['Idempotency-Key'],
        messageSystemAttributeNames: ['All'],
        handleMessage: async (message: Message) => {
          try {
            return await worker.handleMessage(message);
          } catch (error) {
            failures.push(error);
            // The database comes back right after the first message met it down.
            if (failures.length === 1) await proxy.up();
            throw error;
          }
        },
      });
      app.on('error', () => undefined);
      app.on('processing_error', () => undefined);
      cleanups.push(
        () =>
          new Promise<void>((resolve) => {
            app.once('stopped', () => resolve());
            app.stop({ abort: true });
          }),
      );
      app.start();

      await waitFor(async () => (await it_.effects()).length > 0 || failures.length >= 6, {
        timeoutMs: 30_000,
        what: 'the effect, or repeated failures',
      });
      expect(failures.length).toBeLessThan(6);
      expect((await it_.effects()).map((e) => e.id)).toEqual(['after-blip']);
      // The effect is visible at COMMIT; the consumer counts it a moment later, when it settles.
      await waitFor(() => worker.consumer.stats().processed === 1, { what: 'processed counted' });
    },
    TIMEOUT,
  );
});
