import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { Message } from '@aws-sdk/client-sqs';
import { withDedup } from '../../../adapters/sqs/index.js';
import { OUTBOX_ID_HEADER } from '../../../src/outbox/record.js';
import { createTestDatabase, type TestDatabase } from '../../helpers/db.js';

// docs/keys-and-the-dedup-window.md, "Where the key comes from": `sqsSource`, `withDedup`
// default key = `eo-outbox-id` attribute, else FIFO MessageDeduplicationId, else MessageId.
// An outbox relay that sends one row twice to a standard queue (publish succeeded, the
// mark did not commit) gives two SQS messages: two MessageIds, one `eo-outbox-id`.
// The receiving withDedup (no `key` option) must apply it once.

describe('withDedup default key on a relayed row sent twice (standard queue)', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase('attack2_with_dedup_outbox');
    await db.pool.query('CREATE TABLE effects (id text NOT NULL)');
  });
  afterAll(async () => {
    await db.close();
  });

  it('applies the row once', async () => {
    const worker = withDedup(
      async (message, ctx) => {
        await ctx.tx.query('INSERT INTO effects (id) VALUES ($1)', [message.Body]);
      },
      { name: 'relayed', pool: db.pool, schema: db.schema, backoff: () => 0 },
    );
    const send = (messageId: string): Message => ({
      MessageId: messageId,
      ReceiptHandle: `rh-${messageId}`,
      Body: '{"order":7}',
      Attributes: { ApproximateReceiveCount: '1', SentTimestamp: String(Date.now()) },
      MessageAttributes: {
        [OUTBOX_ID_HEADER]: {
          DataType: 'String',
          StringValue: '0190f0aa-0000-7000-8000-000000000001',
        },
      },
    });
    try {
      await worker.handleMessage(send('11111111-aaaa-4000-8000-000000000001'));
      await worker.handleMessage(send('22222222-bbbb-4000-8000-000000000002'));
      const { rows } = await db.pool.query<{ n: string }>('SELECT count(*) AS n FROM effects');
      expect(Number(rows[0]!.n)).toBe(1);
    } finally {
      await worker.consumer.stop();
    }
  });
});
