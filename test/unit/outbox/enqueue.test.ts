import { describe, expect, it } from '@jest/globals';
import { encodeMessage, enqueue, type Queryable } from '../../../src/outbox/enqueue.js';
import { OutboxMessageError } from '../../../src/outbox/errors.js';
import { uuidv7, uuidv7Time } from '../../../src/outbox/uuid.js';

describe('uuidv7', () => {
  it('has version 7, variant 10, and the time it was minted', () => {
    const id = uuidv7(1_700_000_000_123);
    expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(uuidv7Time(id)).toBe(1_700_000_000_123);
  });

  it('sorts in minting order within one millisecond and when the clock steps back', () => {
    const ids = [
      ...Array.from({ length: 5000 }, () => uuidv7(1_800_000_000_000)),
      uuidv7(1_799_999_999_000), // the clock stepped back: the id still sorts after
      uuidv7(1_800_000_000_005),
    ];
    expect([...ids].sort()).toEqual(ids);
    expect(new Set(ids).size).toBe(ids.length);
  });
});

describe('encodeMessage', () => {
  it('derives the content type from the payload', () => {
    expect(encodeMessage({ destination: 'd', payload: { a: 1 } })).toMatchObject({
      payload: Buffer.from('{"a":1}'),
      contentType: 'application/json',
      orderingKey: null,
      headers: {},
      delayMs: 0,
    });
    expect(encodeMessage({ destination: 'd', payload: 'hi' }).contentType).toBe(
      'text/plain; charset=utf-8',
    );
    const bytes = encodeMessage({ destination: 'd', payload: new Uint8Array([0, 255]) });
    expect(bytes).toMatchObject({ contentType: 'application/octet-stream' });
    expect([...bytes.payload]).toEqual([0, 255]);
  });

  const cycle: Record<string, unknown> = {};
  cycle.self = cycle;
  it.each([
    [{ destination: '', payload: 1 }, 'destination', 'must be a non-empty string'],
    [{ destination: 'd'.repeat(201), payload: 1 }, 'destination', 'at most 200'],
    [{ destination: 'd', payload: undefined }, 'payload', 'cannot be serialised as JSON'],
    [{ destination: 'd', payload: 10n }, 'payload', 'cannot be serialised as JSON'],
    [{ destination: 'd', payload: cycle }, 'payload', 'cannot be serialised as JSON'],
    [{ destination: 'd', payload: 1, orderingKey: '' }, 'orderingKey', 'non-empty'],
    [{ destination: 'd', payload: 1, orderingKey: 'a\u0000b' }, 'orderingKey', 'NUL'],
    [{ destination: 'd', payload: 1, headers: { h: 1 } }, 'headers', 'named string'],
    [{ destination: 'd', payload: 1, headers: { h: '\uD800' } }, 'headers.h', 'surrogate'],
    [{ destination: 'd', payload: 1, delayMs: -1 }, 'delayMs', 'from 0 to a year'],
  ])('%j is refused with a typed error naming the field', (message, field, problem) => {
    let thrown: unknown;
    try {
      encodeMessage(message as never);
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(OutboxMessageError);
    expect(thrown).toMatchObject({
      code: 'EO_OUTBOX_MESSAGE',
      retryable: false,
      details: { field },
    });
    expect((thrown as Error).message).toContain(problem);
  });

  it("enqueue runs no SQL for a bad message, so the caller's transaction is untouched", async () => {
    const seen: string[] = [];
    const tx: Queryable = {
      query: async (text: string) => {
        seen.push(text);
        return {};
      },
    };
    await expect(enqueue(tx, { destination: 'd', payload: 10n })).rejects.toBeInstanceOf(
      OutboxMessageError,
    );
    expect(seen).toEqual([]);
    const id = await enqueue(tx, { destination: 'd', payload: 1 });
    expect(seen).toHaveLength(1);
    expect(seen[0]).toContain('pg_notify');
    expect(id).toMatch(/^[0-9a-f-]{36}$/);
    await expect(
      enqueue(
        tx,
        { destination: 'd', payload: 1, orderingKey: 'k' },
        { order: 'arrival' as never },
      ),
    ).rejects.toMatchObject({ code: 'EO_OUTBOX_MESSAGE', details: { field: 'order' } });
    expect(seen).toHaveLength(1);
  });
});
