/**
 * Compressed request bodies (`Content-Encoding: gzip`, `deflate`, `br`), where the
 * framework alone accepts them: Express's own body parsers inflate them, and Fastify
 * does with a `preParsing` hook written as its docs show (the decoded stream, with a
 * `receivedEncodedLength` counted per chunk). The adapters give the handler the
 * decoded body, and the fingerprint is over the decoded body: the same JSON sent
 * compressed or not is one request, another JSON under the same key is refused.
 */
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import { promisify } from 'node:util';
import zlib from 'node:zlib';
import { describe, expect, it } from '@jest/globals';
import express from 'express';
import Fastify, { type FastifyInstance } from 'fastify';
import type { Idempotency, IdempotencyContext } from 'effectively-once/http';
import { idempotentExpress } from 'effectively-once/http/express';
import { idempotencyPlugin } from 'effectively-once/http/fastify';
import { CHARGE, completionFixture } from './completion-support.js';

const fixture = completionFixture('http_encoded_bodies');

const ENCODERS = {
  gzip: promisify(zlib.gzip),
  deflate: promisify(zlib.deflate),
  br: promisify(zlib.brotliCompress),
} as const;
type Encoding = keyof typeof ENCODERS;
const ENCODINGS = Object.keys(ENCODERS) as Encoding[];

interface Answer {
  status: number;
  replayed: boolean;
  body: string;
}

async function post(
  url: string,
  key: string | undefined,
  json: unknown,
  encoding?: Encoding,
): Promise<Answer> {
  const text = Buffer.from(JSON.stringify(json));
  const body = encoding === undefined ? text : await ENCODERS[encoding](text);
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (encoding !== undefined) headers['content-encoding'] = encoding;
  if (key !== undefined) headers['idempotency-key'] = key;
  const response = await fetch(url, { method: 'POST', headers, body });
  return {
    status: response.status,
    replayed: response.headers.get('idempotent-replayed') === 'true',
    body: await response.text(),
  };
}

/** One request under each encoding, then its retries: compressed, plain, and another body. */
async function expectDecoded(url: string, encoding: Encoding): Promise<void> {
  const key = randomUUID();
  const order = { customerId: 'cus_ok', amount: 1234, note: 'x'.repeat(200) };
  const first = await post(url, key, order, encoding);
  expect(first).toMatchObject({ status: 201, replayed: false });
  expect(JSON.parse(first.body)).toEqual({ got: order });
  const again = await post(url, key, order, encoding);
  expect(again).toMatchObject({ status: 201, replayed: true, body: first.body });
  const plain = await post(url, key, order);
  expect(plain).toMatchObject({ status: 201, replayed: true, body: first.body });
  const other = await post(url, key, { ...order, amount: 1 }, encoding);
  expect(other.status).toBe(422);
  expect(await fixture.charges(key)).toBe(1);
}

describe('Express: compressed request bodies', () => {
  async function serve(idempotency: Idempotency): Promise<string> {
    const app = express();
    // The control: Express's own parser, alone.
    app.post('/plain', express.json(), (req, res) => {
      res.status(201).json({ got: req.body as unknown });
    });
    app.post(
      '/charges',
      idempotentExpress(idempotency, async (req, res, { tx, key }) => {
        const body = req.body as { customerId: string };
        await tx.query(CHARGE, [key, body.customerId, 'charge']);
        res.status(201).json({ got: body });
      }),
    );
    return fixture.listen(http.createServer(app));
  }

  it.each(ENCODINGS)(
    '%s: decoded for the handler and the fingerprint, as express.json() does',
    async (encoding) => {
      const base = await serve(fixture.endpoint());
      const control = await post(`${base}/plain`, undefined, { a: 1 }, encoding);
      expect(control).toMatchObject({ status: 201, body: '{"got":{"a":1}}' });
      await expectDecoded(`${base}/charges`, encoding);
    },
  );
});

describe('Express: encoded bodies the parsers refuse', () => {
  async function raw(url: string, encoding: string, body: Buffer): Promise<number> {
    const response = await fetch(url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'content-encoding': encoding,
        'idempotency-key': randomUUID(),
      },
      body,
    });
    await response.arrayBuffer();
    return response.status;
  }

  it('an unknown encoding is a 415 and a corrupt gzip body a 400, as express.json() answers; nothing runs', async () => {
    let runs = 0;
    const app = express();
    app.post('/plain', express.json(), (_req, res) => void res.status(201).end());
    app.post(
      '/charges',
      idempotentExpress(fixture.endpoint(), (_req, res) => {
        runs++;
        res.status(201).end();
      }),
    );
    const base = await fixture.listen(http.createServer(app));
    const corrupt = Buffer.from('not gzip at all');
    const json = Buffer.from('{"a":1}');
    expect(await raw(`${base}/plain`, 'compress', json)).toBe(415);
    expect(await raw(`${base}/charges`, 'compress', json)).toBe(415);
    expect(await raw(`${base}/plain`, 'gzip', corrupt)).toBe(400);
    expect(await raw(`${base}/charges`, 'gzip', corrupt)).toBe(400);
    expect(runs).toBe(0);
  });

  it('a small gzip body that decodes past maxRequestBytes is refused 413 without running', async () => {
    let runs = 0;
    const app = express();
    app.post(
      '/charges',
      idempotentExpress(fixture.endpoint({ maxRequestBytes: 64 * 1024 }), (_req, res) => {
        runs++;
        res.status(201).end();
      }),
    );
    const base = await fixture.listen(http.createServer(app));
    const bomb = await ENCODERS.gzip(Buffer.from(`{"a":"${'a'.repeat(4 * 1024 * 1024)}"}`));
    expect(bomb.byteLength).toBeLessThan(64 * 1024);
    expect(await raw(`${base}/charges`, 'gzip', bomb)).toBe(413);
    expect(runs).toBe(0);
  });
});

describe('Fastify: compressed request bodies, decoded by a preParsing hook', () => {
  const DECODERS = {
    gzip: () => zlib.createGunzip(),
    deflate: () => zlib.createInflate(),
    br: () => zlib.createBrotliDecompress(),
  } as const;

  async function serve(idempotency: Idempotency): Promise<string> {
    const fastify: FastifyInstance = Fastify();
    // As Fastify's Hooks docs say: return the decoded stream, with a
    // receivedEncodedLength updated on each received chunk.
    fastify.addHook('preParsing', async (request, _reply, payload) => {
      const encoding = request.headers['content-encoding'] as Encoding | undefined;
      if (encoding === undefined) return payload;
      const decoded = Object.assign(DECODERS[encoding](), { receivedEncodedLength: 0 });
      payload.on('data', (chunk: Buffer) => (decoded.receivedEncodedLength += chunk.length));
      payload.pipe(decoded);
      return decoded;
    });
    // The control: the hook alone.
    fastify.post('/plain', { config: { idempotency: false } }, async (request, reply) => {
      return reply.code(201).send({ got: request.body });
    });
    await fastify.register(idempotencyPlugin, { idempotency });
    fastify.post('/charges', async (request, reply) => {
      const { tx, key } = request.idempotency as IdempotencyContext;
      const body = request.body as { customerId: string };
      await tx.query(CHARGE, [key, body.customerId, 'charge']);
      return reply.code(201).send({ got: body });
    });
    fixture.later(() => fastify.close());
    await fastify.listen({ port: 0, host: '127.0.0.1' });
    const address = fastify.server.address();
    if (address === null || typeof address === 'string') throw new Error('not on TCP');
    return `http://127.0.0.1:${address.port}`;
  }

  it.each(ENCODINGS)(
    '%s: decoded for the handler and the fingerprint, as the hook alone does',
    async (encoding) => {
      const base = await serve(fixture.endpoint());
      const control = await post(`${base}/plain`, undefined, { a: 1 }, encoding);
      expect(control).toMatchObject({ status: 201, body: '{"got":{"a":1}}' });
      await expectDecoded(`${base}/charges`, encoding);
    },
  );
});
