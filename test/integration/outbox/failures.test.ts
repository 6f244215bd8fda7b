/**
 * What the docs promise about failures: which HTTP answers park a row at once and which
 * are retried, and where a relay's `error` goes when nobody listens for it.
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import type { Logger } from 'effectively-once';
import {
  createRelay,
  httpPublisher,
  listParked,
  migrateOutbox,
  type Relay,
} from 'effectively-once/outbox';
import { createTestDatabase, type TestDatabase } from '../../helpers/db.js';
import { waitFor } from '../../helpers/wait-for.js';
import { Receiver, enqueueCommitted } from './support.js';

let db: TestDatabase;
let receiver: Receiver;
const relays: Relay[] = [];

beforeAll(async () => {
  db = await createTestDatabase('outbox_failures');
  await migrateOutbox(db.pool, { schema: db.schema });
});

afterAll(async () => {
  await db.close();
});

beforeEach(async () => {
  receiver = new Receiver();
  await receiver.start();
});

afterEach(async () => {
  await Promise.all(relays.splice(0).map((r) => r.stop()));
  await receiver.close();
});

function capture(): { logger: Logger; errors: { obj: object; msg?: string }[] } {
  const errors: { obj: object; msg?: string }[] = [];
  const nothing = (): void => undefined;
  return {
    errors,
    logger: {
      debug: nothing,
      info: nothing,
      warn: nothing,
      error: (obj, msg) => errors.push({ obj, msg }),
    },
  };
}

describe('the HTTP publisher', () => {
  it('parks a row at a 4xx answer at once, and retries 408, 409, 429 and 5xx', async () => {
    const statuses = [400, 404, 422, 408, 409, 429, 500, 503];
    // Every key's first request gets its status, the next ones 200.
    receiver.respond = (r, attempt) => (attempt === 1 ? Number(r.body.k) : 200);
    const r = createRelay({
      pool: db.pool,
      schema: db.schema,
      publishers: { effects: httpPublisher({ url: receiver.url, fetch: { attempts: 1 } }) },
      backoff: { initialMs: 5, maxMs: 20 },
    });
    relays.push(r);
    await enqueueCommitted(
      db.pool,
      statuses.map((status) => ({ destination: 'effects', payload: { k: String(status), n: 0 } })),
      db.schema,
    );
    await r.start();
    await waitFor(() => r.metrics().published + r.metrics().parked === statuses.length, {
      what: 'every row published or parked',
    });
    const parked = await listParked(db.pool, { schema: db.schema });
    expect(parked.map((p) => p.lastError?.match(/HTTP (\d+)/)?.[1]).sort()).toEqual([
      '400',
      '404',
      '422',
    ]);
    expect(parked.map((p) => p.attempts)).toEqual([1, 1, 1]);
    expect(receiver.accepted.map((a) => a.body.k).sort()).toEqual([
      '408',
      '409',
      '429',
      '500',
      '503',
    ]);
  });
});

describe("a relay's errors", () => {
  it('go to the logger when nobody listens for them, and the relay carries on', async () => {
    // No outbox table in this schema: every claim fails.
    const missing = `${db.schema}_none`;
    const { logger, errors } = capture();
    const r = createRelay({
      pool: db.pool,
      schema: missing,
      publishers: { effects: httpPublisher({ url: receiver.url }) },
      listen: false,
      logger,
    });
    relays.push(r);
    await r.start();
    await waitFor(() => errors.length >= 2, { what: 'two failed claims logged' });
    expect(errors[0]).toEqual({
      obj: { err: expect.objectContaining({ code: 'EO_DATABASE' }) },
      msg: 'effectively-once: unhandled outbox relay error',
    });
    // With a listener, the listener gets them instead.
    const heard: unknown[] = [];
    r.on('error', (e) => heard.push(e));
    const logged = errors.length;
    await waitFor(() => heard.length >= 2, { what: 'errors heard' });
    expect(errors).toHaveLength(logged);
  });
});
