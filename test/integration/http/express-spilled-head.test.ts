/**
 * The head a handler answered with is what goes out first, whatever the body's size.
 * A body past `maxBodyBytes` is held in a file and piped after COMMIT; Node writes the
 * status line with the first chunk, which comes an I/O later. A callback-style handler
 * (done at its `res.end()`) may call on in that window: docs/http.md says its late
 * `res.status(400)` changes nothing, so the client must be told 201, as stored and as
 * every replay says, not 400 for a committed charge (idempotentFetch takes a 400 as
 * final).
 *
 * The late callback waits on a condition, not a delay: the adapter has answered (the
 * held methods are back on `res`), and the head must be fixed from then on.
 */
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import { describe, expect, it } from '@jest/globals';
import express from 'express';
import { idempotentExpress } from 'effectively-once/http/express';
import { CHARGE, completionFixture, observe } from './completion-support.js';

const fixture = completionFixture('http_express_spilled_head');

describe('Express: the head of an answer held in a file', () => {
  it('a late res.status(400) / res.set() while the spilled body is piped: the first answer is the stored 201', async () => {
    const idempotency = fixture.endpoint({ maxBodyBytes: 16 });
    const app = express();
    const realEnd: unknown = Reflect.get(http.ServerResponse.prototype, 'end');
    let lateCalled = false;
    let lateSet: string | undefined;
    app.post(
      '/export',
      idempotentExpress(idempotency, (_req, res, { tx, key }) => {
        // Callback style: the handler returns nothing; its work is done at res.end().
        void tx.query(CHARGE, [key, 'cus_ok', 'export']).then(() => {
          res.status(201).json({ charged: key, padding: 'x'.repeat(64 * 1024) });
          // Something after the answer fails; its catch sets a status and a header.
          const late = (): void => {
            // Still held (its headersSent says true while held): wait for the answer.
            if (Reflect.get(res, 'end') !== realEnd) return void setImmediate(late);
            lateCalled = true;
            res.status(400);
            try {
              res.set('x-late', 'yes');
            } catch (error) {
              lateSet = (error as { code?: string }).code;
            }
          };
          setImmediate(late);
        });
      }),
    );
    const url = `${await fixture.listen(http.createServer(app))}/export`;
    const key = randomUUID();
    const first = await observe(url, key, {}, fixture.committed);
    expect(await fixture.charges(key)).toBe(1);
    const replay = await observe(url, key, {}, fixture.committed);
    expect(replay.status).toBe(201);
    expect({
      lateCalled,
      first: first.status,
      header: first.headers['x-late'],
      lateSet,
    }).toEqual({
      lateCalled: true,
      first: 201,
      header: undefined,
      // As on a plain response whose head was written: Node refuses the header.
      lateSet: 'ERR_HTTP_HEADERS_SENT',
    });
  });
});
