/**
 * examples/kafka-platformatic-worker.ts (embedded in docs/kafka.md) runs: a redelivered
 * shipment is one row, and the group commits past every record.
 */
import { describe, expect, it } from '@jest/globals';
import { main } from '../../../examples/kafka-platformatic-worker.js';
import { kafkaBrokers } from '../../helpers/env.js';
import { waitFor } from '../../helpers/wait-for.js';
import { createExampleDatabase } from '../examples/support.js';
import {
  committedOffsets,
  createTopics,
  produce,
  testKafka,
  unique,
} from '../kafka/kafka-helpers.js';

const kafka = testKafka();

describe('examples/kafka-platformatic-worker.ts', () => {
  it('inserts each shipment once, however often it is delivered', async () => {
    const topic = unique('plt-example');
    const groupId = unique('g-plt-example');
    await createTopics(kafka, [{ topic, partitions: 2 }]);
    const shipment = (id: number) => ({
      key: `order-${id}`,
      value: JSON.stringify({ shipmentId: `s-${id}`, orderId: `o-${id}`, carrier: 'ups' }),
      headers: { 'idempotency-key': `ship-${id}` },
    });
    // Shipment 1 twice: a producer retry.
    await produce(kafka, topic, [shipment(1), shipment(2), shipment(1), shipment(3)]);
    const db = await createExampleDatabase('plt');
    const stop = new AbortController();
    const running = main({
      signal: stop.signal,
      env: {
        DATABASE_URL: db.url,
        KAFKA_BROKERS: kafkaBrokers().join(','),
        KAFKA_TOPIC: topic,
        KAFKA_GROUP: groupId,
      },
    });
    try {
      await waitFor(
        async () =>
          [...(await committedOffsets(kafka, groupId, topic)).values()].reduce(
            (s, o) => s + Math.max(o, 0),
            0,
          ) === 4,
        { timeoutMs: 60_000, what: 'the group to commit all 4 records' },
      );
      const { rows } = await db.pool.query<{ shipment_id: string }>(
        'SELECT shipment_id FROM shipments ORDER BY shipment_id',
      );
      expect(rows.map((r) => r.shipment_id)).toEqual(['s-1', 's-2', 's-3']);
    } finally {
      stop.abort();
      await running;
      await db.drop();
    }
  }, 90_000);
});
