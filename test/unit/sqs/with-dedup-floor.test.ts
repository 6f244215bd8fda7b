/**
 * Issue 32: `withDedup` (sqs-consumer) holds the admission floor too: a message whose
 * `SentTimestamp` (asked for with sqs-consumer's `messageSystemAttributeNames`) is older
 * than the window is refused before its claim; without a dead-letter queue of ours,
 * handleMessage throws its reason so sqs-consumer keeps the message for the queue's
 * redrive policy. No database is needed: the claim is never reached.
 */
import { afterAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { withDedup } from '../../../adapters/sqs/index.js';

// Never connects: an expired message never reaches the database.
const pool = new pg.Pool({ connectionString: 'postgres://nobody@127.0.0.1:1/none' });
pool.on('error', () => undefined);
afterAll(async () => {
  await pool.end();
});

describe('withDedup and the admission floor', () => {
  it('refuses a message first sent longer ago than the window, without running the handler', async () => {
    let ran = 0;
    const worker = withDedup(
      async () => {
        ran++;
      },
      {
        name: 'legacy',
        pool,
        migrate: false,
        retention: { olderThanMs: 60_000, intervalMs: 86_400_000 },
      },
    );
    const expired: string[] = [];
    worker.consumer.on('expired', (e) => expired.push(e.key));
    try {
      const message = {
        MessageId: 'm-1',
        ReceiptHandle: 'r-1',
        Body: '{}',
        Attributes: { SentTimestamp: String(Date.now() - 120_000), ApproximateReceiveCount: '3' },
      };
      await expect(worker.handleMessage(message)).rejects.toMatchObject({
        code: 'EO_DELIVERY_EXPIRED',
      });
      expect(ran).toBe(0);
      expect(expired).toEqual(['m-1']);
      expect(worker.consumer.stats()).toMatchObject({ expired: 1, processed: 0 });
    } finally {
      await worker.stop({ timeoutMs: 1000 });
    }
  });
});
