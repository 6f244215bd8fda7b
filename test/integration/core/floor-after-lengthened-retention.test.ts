import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  createConsumer,
  type Consumer,
  type Source,
  type SourceContext,
} from '../../../src/index.js';
import { memorySource, type MemorySource } from '../../../src/testing/index.js';
import { createTestDatabase, type TestDatabase } from '../../helpers/db.js';
import { waitFor } from '../../helpers/wait-for.js';

// A rolling deploy that LENGTHENS `retention` (docs/keys-and-the-dedup-window.md, "Changing
// retention"): a message processed by an old instance has a row expiring after the OLD,
// short window, pruned then. The broker redelivers it (ack lost, same SentTimestamp) to a
// new instance, whose floor, measured against its own NEW window, would admit it and apply
// it twice. The new instance keeps `admissionFloor: { windowMs: <old window> }` until the
// new window has passed since the last old instance stopped: the redelivery is expired, applied once.

type Body = { n: number };

/** A hand-written source (docs/writing-a-source.md): a memory queue whose broker stamps firstSentAt. */
function stamped(inner: MemorySource<Body>, firstSentAt: Date): Source<Body> {
  return {
    description: 'stamped-memory',
    run: (ctx: SourceContext<Body>) =>
      inner.run({
        ...ctx,
        signal: ctx.signal,
        logger: ctx.logger,
        deliver: (d) => ctx.deliver({ ...d, firstSentAt, firstSentBy: 'broker' }),
        freeCapacity: () => ctx.freeCapacity(),
        waitForCapacity: () => ctx.waitForCapacity(),
        reportError: (e) => ctx.reportError(e),
      }),
    close: () => inner.close(),
  };
}

describe('admission floor after a rolling deploy that lengthens retention', () => {
  let db: TestDatabase;
  const running: Consumer[] = [];
  beforeAll(async () => {
    db = await createTestDatabase('floor_lengthened');
    await db.pool.query('CREATE TABLE effects (k text NOT NULL)');
  });
  afterAll(async () => {
    for (const c of running) await c.stop();
    await db.close();
  });

  const start = async (
    source: Source<Body>,
    olderThanMs: number,
    intervalMs: number,
    floorWindowMs?: number,
  ) => {
    const c = createConsumer<Body>({
      name: 'payouts',
      source,
      pool: db.pool,
      schema: db.schema,
      retention: { olderThanMs, intervalMs },
      ...(floorWindowMs === undefined ? {} : { admissionFloor: { windowMs: floorWindowMs } }),
      handler: async (_b, { tx, key }) => {
        await tx.query('INSERT INTO effects (k) VALUES ($1)', [key]);
      },
    });
    running.push(c);
    await c.start();
    return c;
  };
  const effects = async (k: string) =>
    (await db.pool.query('SELECT 1 FROM effects WHERE k = $1', [k])).rowCount ?? -1;
  const rowExists = async (k: string) =>
    ((
      await db.pool.query(
        `SELECT 1 FROM ${db.table('processed_messages')} WHERE consumer = 'payouts' AND message_key = $1`,
        [k],
      )
    ).rowCount ?? 0) > 0;

  it('with the old window as admissionFloor.windowMs, a redelivery from before is expired', async () => {
    const firstSentAt = new Date(); // the broker's SentTimestamp, kept on every redelivery
    const key = 'payout-1';

    // Old instance: retention 2 s (floor 1.8 s), pruner every 100 ms.
    const oldQueue = memorySource<Body>();
    const oldInstance = await start(stamped(oldQueue, firstSentAt), 2000, 100);
    oldQueue.send({ n: 1 }, { key });
    await waitFor(() => oldQueue.messages.every((m) => m.state === 'acked'), { what: 'acked' });
    expect(await effects(key)).toBe(1);
    // Its row expires with the old window and is pruned by it.
    await waitFor(async () => !(await rowExists(key)), { what: 'row pruned', timeoutMs: 20_000 });
    await oldInstance.stop();

    // New instance: the deploy lengthened retention to 1 h and keeps the old 2 s window as
    // its floor. The broker redelivers the same message (its ack was lost), >2 s after it
    // was first sent.
    const newQueue = memorySource<Body>();
    const newInstance = await start(stamped(newQueue, firstSentAt), 3600_000, 86_400_000, 2000);
    const expired: string[] = [];
    newInstance.on('expired', (e) => expired.push(e.key));
    const again = newQueue.send({ n: 1 }, { key });
    await waitFor(() => again.state === 'acked' || again.state === 'dead-lettered', {
      what: 'redelivery settled',
    });
    expect({ state: again.state, expired, applied: await effects(key) }).toEqual({
      state: 'dead-lettered',
      expired: [key],
      applied: 1,
    });
  });
});
