import { afterAll, describe, expect, it } from '@jest/globals';
import { main as fifoWorker } from '../../../examples/fifo-worker.js';
import { main as kyselyWorker } from '../../../examples/kysely-handler.js';
import { main as sqsWorker } from '../../../examples/sqs-worker.js';
import { main as wrappedSqsConsumer } from '../../../examples/wrap-sqs-consumer.js';
import { waitFor } from '../../helpers/wait-for.js';
import { createExampleDatabase, ExampleQueues, runTs, sqsExampleEnv } from './support.js';

const queues = new ExampleQueues();
afterAll(() => queues.cleanup());

type Main = (options: { signal: AbortSignal; env?: NodeJS.ProcessEnv }) => Promise<void>;

/** Runs an example's `main` until `done` holds and the queue is empty, then stops it. */
async function runUntil(
  main: Main,
  env: NodeJS.ProcessEnv,
  queueUrl: string,
  done: () => Promise<boolean>,
) {
  const stop = new AbortController();
  const running = main({ signal: stop.signal, env });
  try {
    await waitFor(done, { timeoutMs: 30_000, what: 'the effect' });
    await waitFor(async () => (await queues.depth(queueUrl)) === 0, {
      timeoutMs: 30_000,
      what: 'an empty queue',
    });
  } finally {
    stop.abort();
    await running;
  }
}

const count = async (
  db: { pool: { query: (sql: string) => Promise<{ rows: Array<{ n: string }> }> } },
  sql: string,
) => Number((await db.pool.query(sql)).rows[0]?.n ?? 0);

describe('SQS examples run against the real emulator', () => {
  it('sqs-worker.ts books each order once although the producer sent it again', async () => {
    const db = await createExampleDatabase('sqs_worker');
    const queueUrl = await queues.create('sqs-worker');
    try {
      const orders = [
        { orderId: 'o-1', customerId: 'c-1', totalCents: 1000 },
        { orderId: 'o-2', customerId: 'c-1', totalCents: 250 },
        { orderId: 'o-3', customerId: 'c-2', totalCents: 99 },
      ];
      for (const order of orders) await queues.send(queueUrl, order, order.orderId);
      // Producer retries: same key, same body.
      await queues.send(queueUrl, orders[0], 'o-1');
      await queues.send(queueUrl, orders[0], 'o-1');
      await queues.send(queueUrl, orders[2], 'o-3');
      await runUntil(
        sqsWorker,
        sqsExampleEnv(db.url, queueUrl),
        queueUrl,
        async () => (await count(db, 'SELECT count(*) AS n FROM orders')) >= 3,
      );
      const { rows } = await db.pool.query<{ order_id: string }>(
        'SELECT order_id FROM orders ORDER BY order_id',
      );
      expect(rows.map((r) => r.order_id)).toEqual(['o-1', 'o-2', 'o-3']);
      const lifetime = await db.pool.query<{ id: string; lifetime_cents: string }>(
        'SELECT id, lifetime_cents FROM customers ORDER BY id',
      );
      expect(lifetime.rows.map((r) => [r.id, Number(r.lifetime_cents)])).toEqual([
        ['c-1', 1250],
        ['c-2', 99],
      ]);
    } finally {
      await db.drop();
    }
  });

  it("fifo-worker.ts applies each account's postings once and in order", async () => {
    const db = await createExampleDatabase('fifo_worker');
    const queueUrl = await queues.create('ledger', true);
    try {
      const accounts = ['acct-a', 'acct-b', 'acct-c'];
      for (let seq = 1; seq <= 5; seq++) {
        for (const accountId of accounts) {
          const posting = { accountId, seq, amountCents: seq * 100 };
          const extra = {
            MessageGroupId: accountId,
            MessageDeduplicationId: `${accountId}:${seq}`,
          };
          await queues.send(queueUrl, posting, undefined, extra);
          if (seq === 3) await queues.send(queueUrl, posting, undefined, extra); // a producer retry
        }
      }
      await runUntil(
        fifoWorker,
        sqsExampleEnv(db.url, queueUrl),
        queueUrl,
        async () => (await count(db, 'SELECT count(*) AS n FROM ledger_postings')) >= 15,
      );
      const { rows } = await db.pool.query<{ id: string; balance_cents: string; last_seq: number }>(
        'SELECT id, balance_cents, last_seq FROM ledger_accounts ORDER BY id',
      );
      expect(rows.map((r) => [r.id, Number(r.balance_cents), r.last_seq])).toEqual(
        accounts.map((id) => [id, 1500, 5]),
      );
      expect(await count(db, 'SELECT count(*) AS n FROM ledger_postings')).toBe(15);
    } finally {
      await db.drop();
    }
  });

  it('wrap-sqs-consumer.ts: the sqs-consumer app records each invoice once', async () => {
    const db = await createExampleDatabase('wrap_sqs');
    const queueUrl = await queues.create('invoices');
    try {
      const invoices = ['inv-1', 'inv-2', 'inv-3', 'inv-4'].map((invoiceId, i) => ({
        invoiceId,
        customerId: 'c-9',
        amountCents: 100 * (i + 1),
      }));
      for (const invoice of invoices) await queues.send(queueUrl, invoice, invoice.invoiceId);
      for (const invoice of invoices.slice(0, 2))
        await queues.send(queueUrl, invoice, invoice.invoiceId);
      await runUntil(
        wrappedSqsConsumer,
        sqsExampleEnv(db.url, queueUrl),
        queueUrl,
        async () => (await count(db, 'SELECT count(*) AS n FROM invoices')) >= 4,
      );
      const { rows } = await db.pool.query<{ invoice_id: string; n: string }>(
        'SELECT invoice_id, count(*) AS n FROM invoices GROUP BY invoice_id ORDER BY invoice_id',
      );
      expect(rows.map((r) => [r.invoice_id, Number(r.n)])).toEqual(
        invoices.map((i) => [i.invoiceId, 1]),
      );
    } finally {
      await db.drop();
    }
  });

  it('kysely-handler.ts reserves stock once per reservation through ctx.tx', async () => {
    const db = await createExampleDatabase('kysely');
    const queueUrl = await queues.create('reservations');
    try {
      await db.pool.query('CREATE TABLE stock (sku text PRIMARY KEY, available integer NOT NULL)');
      await db.pool.query("INSERT INTO stock VALUES ('sku-1', 10), ('sku-2', 5)");
      const reservations = [
        { reservationId: 'r-1', sku: 'sku-1', quantity: 3 },
        { reservationId: 'r-2', sku: 'sku-1', quantity: 2 },
        { reservationId: 'r-3', sku: 'sku-2', quantity: 5 },
      ];
      for (const r of reservations) await queues.send(queueUrl, r, r.reservationId);
      for (const r of reservations) await queues.send(queueUrl, r, r.reservationId);
      await runUntil(
        kyselyWorker,
        sqsExampleEnv(db.url, queueUrl),
        queueUrl,
        async () => (await count(db, 'SELECT count(*) AS n FROM reservations')) >= 3,
      );
      const { rows } = await db.pool.query<{ sku: string; available: number }>(
        'SELECT sku, available FROM stock ORDER BY sku',
      );
      expect(rows).toEqual([
        { sku: 'sku-1', available: 5 },
        { sku: 'sku-2', available: 0 },
      ]);
      expect(await count(db, 'SELECT count(*) AS n FROM reservations')).toBe(3);
    } finally {
      await db.drop();
    }
  });

  it('quick-start.ts (the README quick start) runs as written', async () => {
    const db = await createExampleDatabase('quick_start');
    const queueUrl = await queues.create('quick-start');
    try {
      await queues.send(queueUrl, { orderId: 'q-1', totalCents: 500 }, 'q-1');
      await queues.send(queueUrl, { orderId: 'q-1', totalCents: 500 }, 'q-1');
      await queues.send(queueUrl, { orderId: 'q-2', totalCents: 700 }, 'q-2');
      const worker = runTs('examples/quick-start.ts', [], sqsExampleEnv(db.url, queueUrl));
      try {
        await waitFor(
          async () =>
            (await count(
              db,
              "SELECT count(*) AS n FROM information_schema.tables WHERE table_name = 'orders'",
            )) === 1 && (await count(db, 'SELECT count(*) AS n FROM orders')) >= 2,
          { timeoutMs: 30_000, what: 'two orders' },
        );
        await waitFor(async () => (await queues.depth(queueUrl)) === 0, {
          timeoutMs: 30_000,
          what: 'an empty queue',
        });
      } finally {
        worker.child.kill('SIGTERM');
      }
      expect(await worker.exited).toBe(0);
      const { rows } = await db.pool.query<{ id: string }>('SELECT id FROM orders ORDER BY id');
      expect(rows.map((r) => r.id)).toEqual(['q-1', 'q-2']);
    } finally {
      await db.drop();
    }
  });
});
