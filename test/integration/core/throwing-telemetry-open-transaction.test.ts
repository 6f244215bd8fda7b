/**
 * Attack on the claim-transaction driver (src/tx/drive.ts): ConsumerTelemetry says "A
 * hook that throws is ignored (the delivery goes on)". A step's `run` that throws makes
 * driveTransaction throw from inside the claim's transaction; its `finally` then closes
 * (releases to the pool, not destroys) a connection whose transaction is still open,
 * with the claim's row inserted. The next delivery on that connection claims inside it
 * (its BEGIN is only a warning), its claim returns the same xid, its verified COMMIT
 * passes and commits the first delivery's claim too, though its handler never ran. The
 * first delivery's redelivery then finds its key committed: a duplicate, acked. Lost.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createConsumer, migrate } from '../../../src/index.js';
import type { ConsumerTelemetry } from '../../../src/consumer/telemetry.js';
import { createTestDatabase, type TestDatabase } from '../../helpers/db.js';
import { ManualSource } from '../../helpers/manual-source.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase('attack_telemetry_open_tx', { max: 1 });
  await migrate(db.pool, { schema: db.schema });
});
afterAll(async () => db.close());

describe('a telemetry step that throws once', () => {
  it('never has a delivery acked whose handler did not run', async () => {
    let thrown = false;
    const telemetry: ConsumerTelemetry = {
      startDelivery: (delivery) => ({
        step: (name) => ({
          run: (fn) => {
            // The tracer fails once, on the first delivery's handler step.
            if (name === 'handler' && delivery.key === 'first' && !thrown) {
              thrown = true;
              throw new Error('tracer broke');
            }
            return fn();
          },
          end: () => undefined,
        }),
        settled: () => undefined,
        end: () => undefined,
      }),
      startBatch: () => {
        throw new Error('no batches here');
      },
    };
    const ran: string[] = [];
    const source = new ManualSource<string>();
    const consumer = createConsumer<string>({
      name: 'attack-telemetry',
      source,
      pool: db.pool,
      schema: db.schema,
      concurrency: 1,
      telemetry,
      handler: async (_body, ctx) => {
        ran.push(ctx.key);
        await ctx.tx.query('SELECT 1');
      },
    });
    await consumer.start();
    try {
      const first = await source.push({ key: 'first', body: 'a', payload: 'a' });
      const second = await source.push({ key: 'second', body: 'b', payload: 'b' });
      // The first comes back (its visibility lapsed, a rebalance): the broker redelivers it.
      const again = await source.push({ key: 'first', body: 'a', payload: 'a' });
      expect({
        first: first.calls,
        second: second.calls,
        again: again.calls,
        outcomes: [first.outcome, second.outcome, again.outcome],
        ran,
      }).toEqual({
        // The hook's throw is ignored: the delivery runs, untraced, once.
        first: ['ack'],
        second: ['ack'],
        again: ['ack'],
        outcomes: ['processed', 'processed', 'duplicate'],
        ran: ['first', 'second'],
      });
    } finally {
      await consumer.stop();
    }
  });
});
