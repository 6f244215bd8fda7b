/**
 * The outbox relay's RabbitMQ publisher on a real node: rows published with confirms,
 * each with its outbox id as `message-id`; every row published twice (a relay that died
 * after the send, before its mark) is applied once by `rabbitmqSource`; a row no queue
 * is bound for fails (mandatory) and is parked, not counted as published.
 */
import { describe, expect, it } from '@jest/globals';
import { createRelay, listParked, migrateOutbox } from 'effectively-once/outbox';
import { rabbitmqPublisher } from 'effectively-once/rabbitmq';
import { waitFor } from '../../helpers/wait-for.js';
import { enqueueCommitted } from '../outbox/support.js';
import { TIMEOUT, rabbitmqIntegration, rabbitmqUrl, recordEffect, unique } from './harness.js';

const it_ = rabbitmqIntegration('outbox');

describe('outbox → RabbitMQ → rabbitmqSource', () => {
  it(
    'applies every row published twice once, keyed by its outbox id',
    async () => {
      const { db } = it_;
      const queue = await it_.queue('quorum');
      await migrateOutbox(db.pool, { schema: db.schema });
      await db.pool.query(`TRUNCATE ${db.table('eo_outbox')}`);
      const publisher = rabbitmqPublisher({ url: rabbitmqUrl(), exchange: '', routingKey: queue });
      const relay = createRelay({
        pool: db.pool,
        schema: db.schema,
        publishers: { jobs: publisher },
      });
      const ids = await enqueueCommitted(
        db.pool,
        Array.from({ length: 12 }, (_, i) => ({
          destination: 'jobs',
          orderingKey: `k${i % 3}`,
          payload: { id: `o${i}` },
        })),
        db.schema,
      );
      await relay.start();
      try {
        await waitFor(() => relay.stats().published === ids.length, { what: 'first publish' });
        await db.pool.query(
          `UPDATE ${db.table('eo_outbox')} SET state = 'pending', published_at = NULL`,
        );
        relay.wake();
        await waitFor(() => relay.stats().published === 2 * ids.length, {
          what: 'second publish',
        });
      } finally {
        await relay.stop();
        await publisher.close();
      }
      expect(await it_.depth(queue)).toBe(2 * ids.length);
      const consumer = await it_.worker(
        { queue },
        {
          handler: async (job, ctx) => {
            await recordEffect(ctx.tx, job.id, ctx.key, ctx.attempt);
          },
        },
      );
      await waitFor(
        () => consumer.stats().processed + consumer.stats().duplicates === 2 * ids.length,
        { what: 'both copies settled' },
      );
      expect(consumer.stats().duplicates).toBe(ids.length);
      const effects = await it_.effects();
      expect(effects.map((e) => e.worker).sort()).toEqual([...ids].sort());
    },
    TIMEOUT,
  );

  it(
    'fails and parks a row no queue is bound for, instead of counting it published',
    async () => {
      const { db } = it_;
      await migrateOutbox(db.pool, { schema: db.schema });
      await db.pool.query(`TRUNCATE ${db.table('eo_outbox')}`);
      const exchange = unique('unbound');
      await it_.withAdmin(async (admin) => {
        await (await admin.createChannel()).assertExchange(exchange, 'direct', { durable: false });
      });
      const publisher = rabbitmqPublisher({ url: rabbitmqUrl(), exchange, routingKey: 'nowhere' });
      const relay = createRelay({
        pool: db.pool,
        schema: db.schema,
        publishers: { lost: publisher },
        maxAttempts: 1,
      });
      const [id] = await enqueueCommitted(
        db.pool,
        [{ destination: 'lost', payload: { id: 'x' } }],
        db.schema,
      );
      await relay.start();
      try {
        await waitFor(async () => (await relay.outboxStats()).parked === 1, { what: 'parked' });
      } finally {
        await relay.stop();
        await publisher.close();
      }
      expect(relay.stats().published).toBe(0);
      const parked = await listParked(db.pool, { schema: db.schema });
      expect(parked.map((p) => p.id)).toEqual([id]);
    },
    TIMEOUT,
  );
});
