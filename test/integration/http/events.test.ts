/**
 * The request side is observed like the consumer and the relay: `on(event, listener)` /
 * `off`, returning the endpoint, and `stats()`, one event per counter. Real Postgres.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  createIdempotency,
  type IdempotencyEventName,
  type IdempotencyEvents,
} from '../../../src/http/index.js';
import { createTestDatabase, type TestDatabase } from '../../helpers/db.js';

let db: TestDatabase;

beforeAll(async () => {
  db = await createTestDatabase('http_events');
});
afterAll(async () => {
  await db.close();
});

const post = (key: string, body = '{"amountCents":500}'): Request =>
  new Request('http://localhost/payments', {
    method: 'POST',
    headers: { 'idempotency-key': key, 'content-type': 'application/json' },
    body,
  });

describe('createIdempotency events', () => {
  it('fires one event per counted outcome, and off() stops them', async () => {
    const idempotency = createIdempotency({ pool: db.pool, schema: db.schema, scope: 'events' });
    const seen: Array<[IdempotencyEventName, unknown]> = [];
    const names: IdempotencyEventName[] = [
      'executed',
      'replayed',
      'rolled-back',
      'mismatch',
      'failed',
    ];
    const listeners = names.map((name) => {
      const listener = (payload: IdempotencyEvents[typeof name]): void => {
        seen.push([name, payload]);
      };
      expect(idempotency.on(name, listener)).toBe(idempotency);
      return [name, listener] as const;
    });
    try {
      const created = () => Response.json({ ok: true }, { status: 201 });
      const key = randomUUID();
      expect((await idempotency.handle(post(key), created)).status).toBe(201);
      expect((await idempotency.handle(post(key), created)).status).toBe(201);
      expect((await idempotency.handle(post(key, '{"amountCents":1}'), created)).status).toBe(422);
      const unavailable = () => new Response('down', { status: 503 });
      expect((await idempotency.handle(post(randomUUID()), unavailable)).status).toBe(503);
      expect((await idempotency.handle(post(''), created)).status).toBe(400);

      expect(seen.map(([name]) => name)).toEqual([
        'executed',
        'replayed',
        'mismatch',
        'rolled-back',
        'failed',
      ]);
      expect(seen[0]?.[1]).toEqual({ status: 201 });
      expect(seen[2]?.[1]).toMatchObject({
        status: 422,
        error: { code: 'EO_IDEMPOTENCY_KEY_REUSED' },
      });
      expect(idempotency.stats()).toEqual({
        executed: 1,
        replayed: 1,
        rolledBack: 1,
        mismatched: 1,
        busy: 0,
        failed: 1,
      });

      for (const [name, listener] of listeners)
        expect(idempotency.off(name, listener)).toBe(idempotency);
      await idempotency.handle(post(randomUUID()), created);
      expect(seen).toHaveLength(5);
    } finally {
      await idempotency.close();
    }
  });
});
