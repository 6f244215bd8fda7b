/**
 * An idempotent Express handler that hands the request to Express's `next` while its
 * run is open: `res.sendFile` / `res.download` without a callback call `req.next(err)`
 * when the file is missing, or a handler calls `req.next(err)` / `req.next()` itself.
 * What answers then is the app's next handler (its error handler, a 404 handler), not
 * the idempotent one, so its answer must never be stored with a committed effect: a
 * stored 404 is a final refusal to `idempotentFetch`, and a caller who then resubmits
 * under a new key is charged twice. The run fails like a throw: rolled back, nothing
 * stored, and the app's handler answers as it would without the library (each case
 * first probed on a plain Express route). Real Express 5, real Postgres.
 */
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import express, { type NextFunction, type Request, type Response } from 'express';
import { idempotentExpress, type ExpressIdempotentHandler } from 'effectively-once/http/express';
import { CHARGE, completionFixture, observe } from './completion-support.js';

const fixture = completionFixture('http_express_next');

let dir = '';
let missing = '';
beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'eo-forwarded-'));
  missing = path.join(dir, 'no-such-export.txt');
});
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

/** What the plain route does after the charge: the same on both routes. */
type Then = (req: Request, res: Response) => void;

/**
 * `/plain` does `then` without the library (the control); `/charges` charges through
 * `ctx.tx`, then does `then`. The app's 404 handler and error handler answer after.
 */
async function serve(then: Then): Promise<string> {
  const app = express();
  app.post('/plain', (req, res) => then(req, res));
  const handler: ExpressIdempotentHandler = async (req, res, { tx, key }) => {
    await tx.query(CHARGE, [key, 'cus_ok', 'forwarded']);
    then(req, res);
  };
  app.post('/charges', idempotentExpress(fixture.endpoint(), handler));
  app.use((_req: Request, res: Response) => void res.status(404).json({ notFound: true }));
  app.use((err: Error & { status?: number }, _req: Request, res: Response, _n: NextFunction) => {
    res.status(err.status ?? 500).json({ caught: err.message });
  });
  return fixture.listen(http.createServer(app));
}

/**
 * The idempotent route answers as the plain one, nothing committed or stored: the same
 * key sent again runs afresh (no replay), and still nothing is charged.
 */
async function expectAnsweredByApp(base: string, status: number): Promise<void> {
  const control = await observe(`${base}/plain`, randomUUID(), {}, fixture.committed);
  expect(control.status).toBe(status);
  const key = randomUUID();
  const first = await observe(`${base}/charges`, key, {}, fixture.committed);
  expect({ status: first.status, body: first.body.toString() }).toEqual({
    status,
    body: control.body.toString(),
  });
  expect(await fixture.charges(key)).toBe(0);
  expect(fixture.committed.has(key)).toBe(false);
  const again = await observe(`${base}/charges`, key, {}, fixture.committed);
  expect(again.status).toBe(status);
  expect(again.headers['idempotent-replayed']).toBeUndefined();
  expect(await fixture.charges(key)).toBe(0);
}

describe('Express: the request handed to next() while the idempotent run is open', () => {
  it('res.sendFile(missing) without a callback: rolled back, the error handler answers 404', async () => {
    await expectAnsweredByApp(await serve((_req, res) => res.sendFile(missing)), 404);
  });

  it('res.download(missing) without a callback: rolled back, the error handler answers 404', async () => {
    await expectAnsweredByApp(await serve((_req, res) => res.download(missing)), 404);
  });

  it('req.next(err) after writing through ctx.tx: rolled back, the error handler answers', async () => {
    const refused = Object.assign(new Error('card declined downstream'), { status: 402 });
    await expectAnsweredByApp(await serve((req) => req.next?.(refused)), 402);
  });

  it('req.next() without an error: rolled back, the 404 handler answers', async () => {
    await expectAnsweredByApp(await serve((req) => req.next?.()), 404);
  });
});
