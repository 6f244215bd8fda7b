/**
 * Attacks on the Lambda SQS door that held (attack35): they pass on main and add coverage
 * the Lambda suite lacked. The function is invoked directly with the events Lambda's
 * event source mapping sends (the `SQSEvent` shape), on the real Postgres; no broker is
 * needed for what is attacked here (the answer and the effects).
 *
 * Promise (docs/lambda.md): each record's effect once; `batchItemFailures` lists only the
 * records whose effect did not commit; a FIFO group stops at its first failure.
 *
 * - Duplicates inside one batch, run at once (concurrency 3): the same message delivered
 *   twice (one messageId) and a producer's re-send (another messageId, the same
 *   Idempotency-Key). One effect; nothing answered failed.
 * - FIFO, the first record of a group fails, and a later record of the group is a
 *   duplicate of one applied before: the whole group from the failure is answered failed,
 *   nothing of it after the failure runs; the other group is applied and not listed.
 * - Redelivery while the first invocation still runs (a second environment gets the
 *   record after its visibility timeout): the second invocation does not apply it, answers
 *   it failed or done, and the first applies it once.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { Context, SQSEvent, SQSRecord } from 'aws-lambda';
import { lambdaConsumer } from '../../../adapters/lambda/index.js';
import { createTestDatabase, type TestDatabase } from '../../helpers/db.js';

interface Spec {
  messageId?: string;
  key: string;
  body?: string;
  group?: string;
  receiveCount?: number;
}

function record(spec: Spec): SQSRecord {
  return {
    messageId: spec.messageId ?? randomUUID(),
    receiptHandle: randomUUID(),
    body: spec.body ?? JSON.stringify({ key: spec.key }),
    attributes: {
      ApproximateReceiveCount: String(spec.receiveCount ?? 1),
      SentTimestamp: String(Date.now()),
      SenderId: 'AIDATEST',
      ApproximateFirstReceiveTimestamp: String(Date.now()),
      ...(spec.group !== undefined
        ? { MessageGroupId: spec.group, MessageDeduplicationId: spec.key }
        : {}),
    },
    messageAttributes: { 'Idempotency-Key': { dataType: 'String', stringValue: spec.key } },
    md5OfBody: '',
    eventSource: 'aws:sqs',
    eventSourceARN: 'arn:aws:sqs:us-east-1:000000000000:attack35',
    awsRegion: 'us-east-1',
  };
}

const event = (records: SQSRecord[]): SQSEvent => ({ Records: records });
const context = (remainingMs: number): Context =>
  ({ getRemainingTimeInMillis: () => remainingMs }) as unknown as Context;

async function effects(db: TestDatabase): Promise<Map<string, number>> {
  const { rows } = await db.pool.query<{ key: string; n: string }>(
    `SELECT key, count(*)::text AS n FROM ${db.table('effects')} GROUP BY key`,
  );
  return new Map(rows.map((r) => [r.key, Number(r.n)]));
}

describe('attack35: Lambda SQS door attacks that held', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase('a35_lambda', { max: 12 });
    await db.pool.query(`CREATE TABLE ${db.table('effects')} (key text NOT NULL, at text)`);
  });
  afterAll(async () => {
    await db.close();
  });

  const handlerOf = (name: string, options: { concurrency?: number; hold?: Promise<void> } = {}) =>
    lambdaConsumer({
      name,
      pool: db.pool,
      schema: db.schema,
      key: 'Idempotency-Key',
      concurrency: options.concurrency ?? 1,
      handler: async (rec, { tx }) => {
        const { key } = JSON.parse(rec.body) as { key: string };
        await tx.query(`INSERT INTO ${db.table('effects')} (key, at) VALUES ($1, $2)`, [
          key,
          rec.messageId,
        ]);
        if (key.startsWith('fail')) throw new Error('downstream refused');
        await (options.hold ?? new Promise((resolve) => setTimeout(resolve, 100)));
      },
    });

  it('duplicates inside one batch, run at once: one effect, nothing answered failed', async () => {
    const handler = handlerOf('a35-dups', { concurrency: 3 });
    const key = `dup-${randomUUID()}`;
    const same = randomUUID();
    const answer = await handler(
      event([
        record({ messageId: same, key }),
        record({ messageId: same, key }),
        record({ key }),
        record({ key: `other-${randomUUID()}` }),
      ]),
      context(30_000),
    );
    expect(answer.batchItemFailures).toEqual([]);
    expect((await effects(db)).get(key)).toBe(1);
  });

  it('FIFO: a failing first record stops its group, duplicates included; others go on', async () => {
    const handler = handlerOf('a35-fifo');
    const g = `g-${randomUUID()}`;
    const h = `h-${randomUUID()}`;
    const before = `b-${randomUUID()}`;
    // `before` was applied by an earlier invocation.
    expect(
      (await handler(event([record({ key: before, group: g })]), context(30_000)))
        .batchItemFailures,
    ).toEqual([]);
    const batch = [
      record({ key: `fail-${randomUUID()}`, group: g }),
      record({ key: `h1-${randomUUID()}`, group: h }),
      record({ key: before, group: g }),
      record({ key: `g2-${randomUUID()}`, group: g }),
      record({ key: `h2-${randomUUID()}`, group: h }),
    ];
    const answer = await handler(event(batch), context(30_000));
    expect(answer.batchItemFailures.map((f) => f.itemIdentifier).sort()).toEqual(
      [batch[0]!, batch[2]!, batch[3]!].map((r) => r.messageId).sort(),
    );
    const applied = await effects(db);
    const keyOf = (r: SQSRecord): string => (JSON.parse(r.body) as { key: string }).key;
    expect(applied.get(keyOf(batch[0]!))).toBeUndefined(); // rolled back
    expect(applied.get(before)).toBe(1);
    expect(applied.get(keyOf(batch[3]!))).toBeUndefined(); // never started
    expect(applied.get(keyOf(batch[1]!))).toBe(1);
    expect(applied.get(keyOf(batch[4]!))).toBe(1);
  });

  it('redelivery while the first invocation still runs: applied once', async () => {
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    const first = handlerOf('a35-redeliver', { hold: gate });
    const second = handlerOf('a35-redeliver');
    const key = `r-${randomUUID()}`;
    const messageId = randomUUID();
    const running = first(event([record({ messageId, key })]), context(30_000));
    // The second environment gets the record again (its visibility timeout lapsed).
    const again = await second(
      event([record({ messageId, key, receiveCount: 2 })]),
      context(30_000),
    );
    open();
    const answered = await running;
    expect(answered.batchItemFailures).toEqual([]);
    // Whichever environment claimed first applied it; the other answered it failed (busy,
    // it comes back later as a duplicate) or done (a duplicate already): never applied twice.
    expect([[], [{ itemIdentifier: messageId }]]).toContainEqual(again.batchItemFailures);
    const later = await second(
      event([record({ messageId, key, receiveCount: 3 })]),
      context(30_000),
    );
    expect(later.batchItemFailures).toEqual([]);
    expect((await effects(db)).get(key)).toBe(1);
  });
});
