import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createConsumer, type ConsumerOptions } from '../../../src/index.js';
import { memorySource } from '../../../src/testing/index.js';
import { createTestDatabase, type TestDatabase } from '../../helpers/db.js';
import { waitFor } from '../../helpers/wait-for.js';

// docs/sqs.md ("Keys"): "The consumer's `key` option (over the whole delivery) overrides
// all of these." The restructuring removed that option from createConsumer, but a
// `key` passed to it is neither honoured nor refused: the consumer silently keys by the
// source's default. A producer's resend (one business id, a new broker message id) is
// then applied twice.

type Body = { id: string };

describe("createConsumer's `key` option (docs/sqs.md)", () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase('attack2_consumer_key');
    await db.pool.query('CREATE TABLE effects (id text NOT NULL)');
  });
  afterAll(async () => {
    await db.close();
  });

  it('is honoured or refused, never silently dropped', async () => {
    const source = memorySource<Body>();
    const options = {
      name: 'payments',
      source,
      pool: db.pool,
      schema: db.schema,
      key: (delivery: { body: Body }) => delivery.body.id,
      handler: async (
        body: Body,
        { tx }: { tx: { query: (s: string, p: unknown[]) => Promise<unknown> } },
      ) => {
        await tx.query('INSERT INTO effects (id) VALUES ($1)', [body.id]);
      },
    } as unknown as ConsumerOptions<Body>;
    let consumer;
    try {
      consumer = createConsumer<Body>(options);
    } catch {
      return; // refused at construction: acceptable, the operator learns at deploy time
    }
    await consumer.start();
    try {
      // Two sends of one payment: the source mints a fresh id per send (a standard
      // queue's MessageId), the consumer's `key` names the business id.
      source.send({ id: 'pay-1' });
      source.send({ id: 'pay-1' });
      await waitFor(() => source.messages.every((m) => m.state === 'acked'), {
        what: 'both acked',
      });
      const { rows } = await db.pool.query<{ n: string }>(
        "SELECT count(*) AS n FROM effects WHERE id = 'pay-1'",
      );
      expect(Number(rows[0]!.n)).toBe(1);
    } finally {
      await consumer.stop();
    }
  });
});
