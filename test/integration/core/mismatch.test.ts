import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import type { ConsumerEvents } from '../../../src/index.js';
import { createTestDatabase, type TestDatabase } from '../../helpers/db.js';
import { memoryHarness } from '../../helpers/memory-harness.js';
import { waitFor } from '../../helpers/wait-for.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase('mismatch');
});
afterAll(async () => db.close());
beforeEach(async () => {
  await db.pool.query('DROP TABLE IF EXISTS charges; DROP TABLE IF EXISTS processed_messages');
});

describe('same key, different payload', () => {
  it('emits mismatch, dead-letters the second payload and applies the effect once', async () => {
    const h = await memoryHarness(db);
    const mismatches: Array<ConsumerEvents['mismatch']> = [];
    h.consumer.on('mismatch', (e) => mismatches.push(e));
    const first = h.source.send({ id: 'o1', amount: 100 }, { key: 'o1' });
    await h.consumer.start();
    await waitFor(() => first.state === 'acked');
    const second = h.source.send({ id: 'o1', amount: 999 }, { key: 'o1' });
    const replay = h.source.send({ id: 'o1', amount: 100 }, { key: 'o1' });
    await waitFor(() => second.state === 'dead-lettered' && replay.state === 'acked');
    await h.consumer.stop();
    expect(mismatches).toHaveLength(1);
    expect(mismatches[0]!.storedHash).not.toBe(mismatches[0]!.payloadHash);
    expect(second.deadLetterReason?.code).toBe('EO_PAYLOAD_MISMATCH');
    expect(replay.outcomes).toEqual(['duplicate']);
    expect(await h.effects()).toEqual([{ id: 'o1', amount: 100 }]);
  });

  it("with onMismatch 'ack' treats it as a duplicate", async () => {
    const h = await memoryHarness(db, { onMismatch: 'ack' });
    const first = h.source.send({ id: 'o2', amount: 1 }, { key: 'o2' });
    await h.consumer.start();
    await waitFor(() => first.state === 'acked');
    const second = h.source.send({ id: 'o2', amount: 2 }, { key: 'o2' });
    await waitFor(() => second.state === 'acked');
    await h.consumer.stop();
    expect(h.consumer.stats().mismatches).toBe(1);
    expect(await h.effects()).toEqual([{ id: 'o2', amount: 1 }]);
  });

  it('with payloadHash off, stores no hash and cannot tell payloads apart', async () => {
    const h = await memoryHarness(db, { payloadHash: false });
    const first = h.source.send({ id: 'o3', amount: 1 }, { key: 'o3' });
    const second = h.source.send({ id: 'o3', amount: 2 }, { key: 'o3' });
    await h.consumer.start();
    await waitFor(() => first.state === 'acked' && second.state === 'acked');
    await h.consumer.stop();
    const { rows } = await db.pool.query('SELECT payload_hash FROM processed_messages');
    expect(rows).toEqual([{ payload_hash: null }]);
    expect(h.consumer.stats().mismatches).toBe(0);
    expect(await h.effects()).toHaveLength(1);
  });
});
