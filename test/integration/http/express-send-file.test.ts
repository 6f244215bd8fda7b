/**
 * `res.sendFile` in an idempotent Express handler, with a request that carries Range or
 * conditional headers. Plain Express 5 (the `send` module) honours them on a POST too
 * (probed first: `Range` gives a 206 with part of the file, a matching
 * `If-None-Match` a bodyless 304). Such an answer depends on headers the fingerprint
 * does not cover, so stored it would be replayed to a retry that sent none of them: a
 * part of the file, or nothing. The stored answer is never one.
 */
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import express, { type NextFunction, type Request, type Response } from 'express';
import { idempotentExpress } from 'effectively-once/http/express';
import { CHARGE, completionFixture } from './completion-support.js';

const fixture = completionFixture('http_express_send_file');

const content = 'effectively-once, a file sent whole\n'.repeat(20);
let dir = '';
let file = '';
beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'eo-send-file-'));
  file = path.join(dir, 'export.txt');
  fs.writeFileSync(file, content);
});
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

interface Got {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

function post(url: string, headers: Record<string, string>): Promise<Got> {
  return new Promise((resolve, reject) => {
    const request = http.request(url, { method: 'POST', headers }, (response) => {
      let body = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => (body += chunk));
      response.on('end', () =>
        resolve({ status: response.statusCode ?? 0, headers: response.headers, body }),
      );
      response.on('error', reject);
    });
    request.on('error', reject);
    request.end();
  });
}

async function serve(): Promise<string> {
  const app = express();
  // The control: plain Express.
  app.post('/plain', (_req, res) => res.sendFile(file));
  app.post(
    '/export',
    idempotentExpress(fixture.endpoint(), async (_req, res, { tx, key }) => {
      await tx.query(CHARGE, [key, 'cus_ok', 'export']);
      await new Promise<void>((resolve, reject) =>
        res.sendFile(file, (err) => (err ? reject(err) : resolve())),
      );
    }),
  );
  app.use((err: Error, _req: Request, res: Response, _next: NextFunction) => {
    res.status(500).json({ caught: err.message });
  });
  return fixture.listen(http.createServer(app));
}

describe('Express: res.sendFile on an idempotent POST with Range or conditional headers', () => {
  it('Range: the whole file is sent and stored (200), not a 206 of part of it', async () => {
    const base = await serve();
    const control = await post(`${base}/plain`, { range: 'bytes=0-9' });
    expect(control).toMatchObject({ status: 206, body: content.slice(0, 10) });
    const key = randomUUID();
    const first = await post(`${base}/export`, { 'idempotency-key': key, range: 'bytes=0-9' });
    expect(first.status).toBe(200);
    expect(first.body).toBe(content);
    const retry = await post(`${base}/export`, { 'idempotency-key': key });
    expect(retry.status).toBe(200);
    expect(retry.headers['idempotent-replayed']).toBe('true');
    expect(retry.headers['content-range']).toBeUndefined();
    expect(await fixture.charges(key)).toBe(1);
  });

  it('If-Modified-Since: the whole file (200), not a bodyless 304', async () => {
    const base = await serve();
    const since = new Date(Date.now() + 60_000).toUTCString();
    const control = await post(`${base}/plain`, { 'if-modified-since': since });
    expect(control.status).toBe(304);
    const key = randomUUID();
    const first = await post(`${base}/export`, {
      'idempotency-key': key,
      'if-modified-since': since,
    });
    expect(first).toMatchObject({ status: 200, body: content });
    const retry = await post(`${base}/export`, { 'idempotency-key': key });
    expect(retry).toMatchObject({ status: 200 });
    expect(await fixture.charges(key)).toBe(1);
  });

  it('a matching If-None-Match: the whole file (200), never a stored 304', async () => {
    const base = await serve();
    const etag = (await post(`${base}/plain`, {})).headers.etag ?? '';
    const control = await post(`${base}/plain`, { 'if-none-match': etag });
    expect(control.status).toBe(304);
    const key = randomUUID();
    const first = await post(`${base}/export`, { 'idempotency-key': key, 'if-none-match': etag });
    expect(first).toMatchObject({ status: 200, body: content });
    const retry = await post(`${base}/export`, { 'idempotency-key': key });
    expect(retry).toMatchObject({ status: 200, body: content });
    expect(await fixture.charges(key)).toBe(1);
  });

  it('res.json on an idempotent GET with a matching If-None-Match: a 200 with the body, not a 304 (req.fresh)', async () => {
    const app = express();
    app.get('/plain', (_req, res) => void res.json({ report: 1 }));
    app.get(
      '/report',
      idempotentExpress(fixture.endpoint(), (_req, res) => void res.json({ report: 1 })),
    );
    const base = await fixture.listen(http.createServer(app));
    const get = (url: string, headers: Record<string, string>): Promise<Got> =>
      new Promise((resolve, reject) => {
        http
          .get(url, { headers }, (response) => {
            let body = '';
            response.setEncoding('utf8');
            response.on('data', (chunk: string) => (body += chunk));
            response.on('end', () =>
              resolve({ status: response.statusCode ?? 0, headers: response.headers, body }),
            );
          })
          .on('error', reject);
      });
    const etag = (await get(`${base}/plain`, {})).headers.etag ?? '';
    expect((await get(`${base}/plain`, { 'if-none-match': etag })).status).toBe(304);
    const key = randomUUID();
    const first = await get(`${base}/report`, { 'idempotency-key': key, 'if-none-match': etag });
    expect(first).toMatchObject({ status: 200, body: '{"report":1}' });
    const retry = await get(`${base}/report`, { 'idempotency-key': key });
    expect(retry).toMatchObject({ status: 200, body: '{"report":1}' });
  });
});
