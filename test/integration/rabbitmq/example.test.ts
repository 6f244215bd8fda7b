/**
 * examples/rabbitmq-worker.ts (docs/rabbitmq.md) run against the test node: each shipment
 * created once although every message was sent twice.
 */
import { describe, expect, it } from '@jest/globals';
import { main } from '../../../examples/rabbitmq-worker.js';
import { waitFor } from '../../helpers/wait-for.js';
import { createExampleDatabase } from '../examples/support.js';
import { rabbitmqIntegration, rabbitmqUrl, unique } from './harness.js';

const it_ = rabbitmqIntegration('example');

describe('examples/rabbitmq-worker.ts against the real broker', () => {
  it('creates each shipment once although every message was sent twice', async () => {
    const db = await createExampleDatabase('rabbitmq_worker');
    const queue = await it_.queue('quorum');
    const dlx = unique('dlx');
    await it_.withAdmin(async (admin) => {
      await (await admin.createChannel()).assertExchange(dlx, 'fanout', { durable: true });
    });
    const shipments = Array.from({ length: 6 }, (_, i) => ({
      shipmentId: `s-${i}`,
      orderId: `o-${i % 3}`,
      carrier: i % 2 ? 'dhl' : 'ups',
    }));
    const messages = shipments.map((s) => ({ body: s, options: { messageId: s.shipmentId } }));
    await it_.send(queue, [...messages, ...messages]);
    const stop = new AbortController();
    const env = {
      ...process.env,
      DATABASE_URL: db.url,
      RABBITMQ_URL: rabbitmqUrl(),
      RABBITMQ_QUEUE: queue,
      RABBITMQ_DLX: dlx,
    };
    const running = main({ signal: stop.signal, env });
    try {
      await waitFor(async () => (await it_.depth(queue)) === 0, { what: 'the queue drained' });
      await waitFor(
        async () =>
          Number(
            (await db.pool.query<{ n: string }>('SELECT count(*) AS n FROM shipments')).rows[0]?.n,
          ) === 6,
        { what: 'six shipments' },
      );
    } finally {
      stop.abort();
      await running;
    }
    const { rows } = await db.pool.query<{ shipment_id: string; n: string }>(
      'SELECT shipment_id, count(*) AS n FROM shipments GROUP BY shipment_id ORDER BY shipment_id',
    );
    expect(rows.map((r) => [r.shipment_id, Number(r.n)])).toEqual(
      shipments.map((s) => [s.shipmentId, 1]),
    );
    await db.drop();
  }, 90_000);
});
