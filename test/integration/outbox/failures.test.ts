/**
 * What the docs promise about failures: which HTTP answers park a row at once and which
 * are retried, and where a relay's `error` goes when nobody listens for it.
 */
import { describe, expect, it } from '@jest/globals';
import type { Logger } from 'effectively-once';
import { listParked } from 'effectively-once/outbox';
import { waitFor } from '../../helpers/wait-for.js';
import { enqueueCommitted, outboxTestBed } from './support.js';

const bed = outboxTestBed('outbox_failures');

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
    bed.receiver.respond = (r, attempt) => (attempt === 1 ? Number(r.body.k) : 200);
    const r = bed.relay();
    await enqueueCommitted(
      bed.db.pool,
      statuses.map((status) => ({ destination: 'effects', payload: { k: String(status), n: 0 } })),
      bed.db.schema,
    );
    await r.start();
    await waitFor(() => r.stats().published + r.stats().parked === statuses.length, {
      what: 'every row published or parked',
    });
    const parked = await listParked(bed.db.pool, { schema: bed.db.schema });
    expect(parked.map((p) => p.lastError?.match(/HTTP (\d+)/)?.[1]).sort()).toEqual([
      '400',
      '404',
      '422',
    ]);
    expect(parked.map((p) => p.attempts)).toEqual([1, 1, 1]);
    expect(bed.receiver.accepted.map((a) => a.body.k).sort()).toEqual([
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
    const missing = `${bed.db.schema}_none`;
    const { logger, errors } = capture();
    const r = bed.relay({ schema: missing, listen: false, logger });
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
