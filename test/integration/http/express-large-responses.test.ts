/**
 * Express answers larger than `maxBodyBytes`, written the ways Express's docs show:
 * `res.write` honouring backpressure, `stream.pipe(res)`, `res.sendFile`. Each is held
 * until COMMIT with bounded memory (past the bound the body goes to a temporary file,
 * and `write()` says when to wait), sent whole after it, and replayed without a body.
 */
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import express from 'express';
import { idempotentExpress, type ExpressIdempotentHandler } from 'effectively-once/http/express';
import { CHARGE, completionFixture, observe, openSpillFiles } from './completion-support.js';

const fixture = completionFixture('http_express_large');
const BOUND = 64 * 1024;

/** `size` bytes of a repeating, position-dependent pattern (a misordered chunk shows). */
function pattern(size: number): Buffer {
  const bytes = Buffer.alloc(size);
  for (let i = 0; i < size; i++) bytes[i] = (i * 7 + Math.floor(i / 4096)) % 251;
  return bytes;
}

async function serve(handler: ExpressIdempotentHandler): Promise<string> {
  const idempotency = fixture.endpoint({ maxBodyBytes: BOUND });
  const app = express();
  app.post('/r', idempotentExpress(idempotency, handler));
  return `${await fixture.listen(http.createServer(app))}/r`;
}

async function expectSentWholeThenOmitted(url: string, expected: Buffer): Promise<void> {
  const key = randomUUID();
  const first = await observe(url, key, {}, fixture.committed);
  expect(first).toMatchObject({ status: 200, committedAtHead: true });
  expect(first.body.byteLength).toBe(expected.byteLength);
  expect(first.body.equals(expected)).toBe(true);
  const replay = await observe(url, key, {}, fixture.committed);
  expect(replay.status).toBe(200);
  expect(replay.headers['idempotent-body-omitted']).toBe('too-large');
  expect(replay.body.byteLength).toBe(0);
  expect(await fixture.charges(key)).toBe(1);
  // The temporary file is gone with the response.
  expect(openSpillFiles()).toEqual([]);
}

describe('Express: an answer past maxBodyBytes', () => {
  const body = pattern(4 * 1024 * 1024);
  let file: string;
  beforeAll(() => {
    file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'eo-test-')), 'export.bin');
    fs.writeFileSync(file, body);
  });
  afterAll(() => fs.rmSync(path.dirname(file), { recursive: true, force: true }));

  it('res.write() says when to wait: a handler awaiting drain finishes, the body arrives whole', async () => {
    let refusals = 0;
    const spillNames: string[] = [];
    const url = await serve(async (_req, res, { tx, key }) => {
      await tx.query(CHARGE, [key, 'cus_ok', 'export']);
      res.status(200).type('application/octet-stream');
      for (let i = 0; i < body.length; i += 16 * 1024) {
        if (res.write(body.subarray(i, i + 16 * 1024))) continue;
        refusals++;
        await once(res, 'drain');
        // The file behind the body is open, and already gone from the directory.
        spillNames.push(
          ...fs.readdirSync(os.tmpdir()).filter((n) => /^effectively-once-.*\.body$/.test(n)),
        );
      }
      res.end();
    });
    await expectSentWholeThenOmitted(url, body);
    expect(refusals).toBeGreaterThan(0);
    expect(spillNames).toEqual([]);
  });

  it('stream.pipe(res): the source is paused by backpressure, the body arrives whole', async () => {
    let pauses = 0;
    const url = await serve((_req, res, { tx, key }) => {
      void tx.query(CHARGE, [key, 'cus_ok', 'export']).then(() => {
        const chunks = function* () {
          for (let i = 0; i < body.length; i += 16 * 1024) yield body.subarray(i, i + 16 * 1024);
        };
        const source = Readable.from(chunks(), { objectMode: false });
        // Paused by backpressure, not by the unpipe at its end.
        source.on('pause', () => {
          if (!source.readableEnded) pauses++;
        });
        res.status(200).type('application/octet-stream');
        source.pipe(res);
      });
    });
    await expectSentWholeThenOmitted(url, body);
    expect(pauses).toBeGreaterThan(0);
  });

  it('res.sendFile(): the file whole; its callback runs before COMMIT, so the handler may go on', async () => {
    const url = await serve(async (_req, res, { tx, key }) => {
      await new Promise<void>((resolve, reject) =>
        res.sendFile(file, (err) => (err ? reject(err) : resolve())),
      );
      await tx.query(CHARGE, [key, 'cus_ok', 'export']);
    });
    await expectSentWholeThenOmitted(url, body);
  });

  it('a rolled-back answer past the bound (a 5xx) is sent whole, unstored; its file is gone', async () => {
    const url = await serve(async (_req, res, { tx, key }) => {
      await tx.query(CHARGE, [key, 'cus_ok', 'export']);
      res.status(503).type('application/octet-stream');
      res.end(body);
    });
    const key = randomUUID();
    const first = await observe(url, key, {}, fixture.committed);
    expect(first.status).toBe(503);
    expect(first.body.equals(body)).toBe(true);
    expect(await fixture.charges(key)).toBe(0);
    expect(openSpillFiles()).toEqual([]);
  });
});
