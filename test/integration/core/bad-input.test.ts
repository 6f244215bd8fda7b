import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  BodyParseError,
  ConfigurationError,
  createConsumer,
  InvalidKeyError,
} from '../../../src/index.js';
import { memorySource } from '../../../src/testing/index.js';
import { createTestDatabase, type TestDatabase } from '../../helpers/db.js';
import { memoryHarness } from '../../helpers/memory-harness.js';
import { waitFor } from '../../helpers/wait-for.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase('bad_input');
});
afterAll(async () => db.close());

describe('bad input is dead-lettered with a typed error and loses nothing else', () => {
  it('empty, over-long, NUL and lone-surrogate keys; a rejected body; good messages still flow', async () => {
    const h = await memoryHarness(db, { maxKeyLength: 255 });
    const tooLong = h.source.send({ id: 'long', amount: 1 }, { key: 'k'.repeat(256) });
    const atLimit = h.source.send({ id: 'limit', amount: 1 }, { key: 'k'.repeat(255) });
    const empty = h.source.send({ id: 'empty', amount: 1 }, { key: '' });
    const nul = h.source.send({ id: 'nul', amount: 1 }, { key: 'a\u0000b' });
    // Two keys differing only in lone surrogates: both would be "a\ufffd" in Postgres.
    const lone = h.source.send({ id: 'lone', amount: 1 }, { key: 'a\ud800' });
    const lone2 = h.source.send({ id: 'lone2', amount: 1 }, { key: 'a\udc00' });
    const unicode = h.source.send({ id: 'unicode', amount: 1 }, { key: 'ключ-🔑-鍵' });
    const rejected = h.source.send(
      { id: 'rejected', amount: 1 },
      { key: 'r', rejection: new BodyParseError('not JSON') },
    );
    const good = h.source.send({ id: 'good', amount: 1 }, { key: 'good' });
    await h.consumer.start();
    await waitFor(() => h.source.outstanding === 0);
    await h.consumer.stop();

    for (const m of [tooLong, empty, nul, lone, lone2]) {
      expect(m.state).toBe('dead-lettered');
      expect(m.deadLetterReason).toBeInstanceOf(InvalidKeyError);
      expect(m.deadLetterReason?.retryable).toBe(false);
    }
    expect(rejected.state).toBe('dead-lettered');
    expect(rejected.deadLetterReason?.code).toBe('EO_BODY_PARSE');
    expect([atLimit.state, unicode.state, good.state]).toEqual(['acked', 'acked', 'acked']);
    expect((await h.effects()).map((e) => e.id)).toEqual(['good', 'limit', 'unicode']);
  });

  it('rejects options out of range at construction, naming the option', () => {
    const base = {
      name: 'x',
      source: memorySource(),
      pool: db.pool,
      handler: async () => undefined,
    };
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ concurrency: 0 }, 'concurrency'],
      [{ concurrency: 1.5 }, 'concurrency'],
      [{ maxAttempts: 0 }, 'maxAttempts'],
      [{ lockTimeoutMs: -1 }, 'lockTimeoutMs'],
      [{ maxKeyLength: 100_000 }, 'maxKeyLength'],
      [{ onMismatch: 'explode' }, 'onMismatch'],
      [{ name: '' }, 'name'],
      // The name is half the dedup table's primary key: NUL fails every claim, and a
      // lone surrogate is sent as U+FFFD, so "orders-\ud800" and "orders-\ud801" would
      // share one key space (the second consumer's messages taken for duplicates).
      [{ name: 'orders-\u0000' }, 'name'],
      [{ name: 'orders-\ud800' }, 'name'],
      [{ table: 'x'.repeat(64) }, 'table'],
      [{ handler: 'nope' }, 'handler'],
      [{ backoff: { initialMs: 10, maxMs: 5 } }, 'backoff.maxMs'],
      [{ retention: { olderThanMs: 0 } }, 'retention.olderThanMs'],
      [{ retention: { olderThanMs: 1000, dutyCycle: 1.5 } }, 'retention.dutyCycle'],
    ];
    for (const [override, option] of cases) {
      const attempt = () => createConsumer({ ...base, ...override });
      expect(attempt).toThrow(ConfigurationError);
      expect(attempt).toThrow(`"${option}"`);
    }
  });
});
