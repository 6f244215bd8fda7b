/**
 * `toNodeListener`: the web core on a plain `node:http` server on loopback, against the
 * test Postgres: replay, a request body streamed in, a response body streamed out, a
 * client that disconnects, and a handler that fails.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import {
  createIdempotency,
  toNodeListener,
  type FetchHandler,
  type Idempotency,
  type NodeListenerOptions,
} from '../../../src/http/index.js';
import * as example from '../../../examples/http-node.js';
import { createTestDatabase, type TestDatabase } from '../../helpers/db.js';
import { createExampleDatabase } from '../examples/support.js';
import { waitFor } from '../../helpers/wait-for.js';
import { gate } from './support.js';

let db: TestDatabase;
let idempotency: Idempotency;
const servers: http.Server[] = [];

beforeAll(async () => {
  db = await createTestDatabase('node_listener');
  await db.pool.query('CREATE TABLE effects (key text NOT NULL, bytes int NOT NULL)');
  idempotency = createIdempotency({ pool: db.pool, schema: db.schema, scope: 'public' });
});

afterEach(async () => {
  for (const server of servers.splice(0)) {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
});

afterAll(async () => {
  await idempotency.close();
  await db.close();
});

async function serve(handler: FetchHandler, options?: NodeListenerOptions): Promise<string> {
  const server = http.createServer(toNodeListener(handler, options));
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

const effects = async (key: string): Promise<number> => {
  const { rows } = await db.pool.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM effects WHERE key = $1',
    [key],
  );
  return rows[0]?.n ?? -1;
};

/** The endpoint of these tests: records the effect with the body's size, answers 201. */
const recordEffect = (hold?: Promise<void>, started?: () => void) =>
  idempotency.handler(async (request, { tx, key }) => {
    const bytes = (await request.arrayBuffer()).byteLength;
    started?.();
    await hold;
    await tx.query('INSERT INTO effects (key, bytes) VALUES ($1, $2)', [key, bytes]);
    return Response.json({ key, bytes }, { status: 201, headers: { location: `/things/${key}` } });
  });

/** A POST written in pieces with node:http (a chunked body, streamed from the socket). */
function postInPieces(url: string, key: string, pieces: string[]): Promise<http.IncomingMessage> {
  return new Promise((resolve, reject) => {
    const req = http.request(`${url}/things`, {
      method: 'POST',
      headers: { 'idempotency-key': key, 'content-type': 'text/plain' },
    });
    req.on('response', resolve).on('error', reject);
    void (async () => {
      for (const piece of pieces) {
        req.write(piece);
        await new Promise((r) => setTimeout(r, 20));
      }
      req.end();
    })();
  });
}

const text = async (res: http.IncomingMessage): Promise<string> => {
  let out = '';
  for await (const chunk of res) out += String(chunk);
  return out;
};

describe('toNodeListener', () => {
  it('a body streamed in runs once; the retry is a byte-identical replay', async () => {
    const url = await serve(recordEffect());
    const key = randomUUID();
    const first = await postInPieces(url, key, ['abc', 'def', 'ghi']);
    const firstBody = await text(first);
    expect(first.statusCode).toBe(201);
    expect(first.headers.location).toBe(`/things/${key}`);
    expect(JSON.parse(firstBody)).toEqual({ key, bytes: 9 });

    // The same bytes sent in one piece are the same request.
    const retry = await fetch(`${url}/things`, {
      method: 'POST',
      headers: { 'idempotency-key': key, 'content-type': 'text/plain' },
      body: 'abcdefghi',
    });
    expect(retry.status).toBe(201);
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(retry.headers.get('location')).toBe(`/things/${key}`);
    expect(await retry.text()).toBe(firstBody);
    expect(await effects(key)).toBe(1);

    const other = await fetch(`${url}/things`, {
      method: 'POST',
      headers: { 'idempotency-key': key, 'content-type': 'text/plain' },
      body: 'another body',
    });
    expect(other.status).toBe(422);
    expect(other.headers.get('content-type')).toBe('application/problem+json');
  });

  it('a streamed response: committed first, then sent as it comes, not stored', async () => {
    const more = gate();
    const url = await serve(
      idempotency.handler(async (_request, ctx) => {
        const { tx, key } = ctx;
        await tx.query('INSERT INTO effects (key, bytes) VALUES ($1, 0)', [key]);
        const encoder = new TextEncoder();
        const body = new ReadableStream<Uint8Array>({
          async start(controller) {
            controller.enqueue(encoder.encode('first\n'));
            await more.wait;
            controller.enqueue(encoder.encode('second\n'));
            controller.close();
          },
        });
        return ctx.streamed(new Response(body, { headers: { 'content-type': 'text/plain' } }));
      }),
    );
    const key = randomUUID();
    const response = await fetch(`${url}/export`, {
      method: 'POST',
      headers: { 'idempotency-key': key },
    });
    expect(response.status).toBe(200);
    expect(await effects(key)).toBe(1); // the answer started after COMMIT
    const reader = (response.body as ReadableStream<Uint8Array>).getReader();
    const decoder = new TextDecoder();
    const firstChunk = await reader.read();
    // The first line arrived while the handler's stream still waits for the second.
    expect(decoder.decode(firstChunk.value)).toBe('first\n');
    more.open();
    let rest = '';
    for (let r = await reader.read(); !r.done; r = await reader.read())
      rest += decoder.decode(r.value);
    expect(rest).toBe('second\n');

    const replay = await fetch(`${url}/export`, {
      method: 'POST',
      headers: { 'idempotency-key': key },
    });
    expect(replay.status).toBe(200);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(replay.headers.get('idempotent-body-omitted')).toBe('stream');
    expect(await replay.text()).toBe('');
    expect(await effects(key)).toBe(1);
  });

  it('a client that disconnects mid-request: the effect commits once, its retry replays', async () => {
    const hold = gate();
    const started = gate();
    const url = await serve(recordEffect(hold.wait, started.open));
    const key = randomUUID();
    const req = http.request(`${url}/things`, {
      method: 'POST',
      headers: { 'idempotency-key': key, 'content-type': 'text/plain' },
    });
    const gone = new Promise<Error>((resolve) => req.on('error', resolve));
    req.end('payload');
    await started.wait; // the handler runs, in its transaction
    req.destroy();
    expect((await gone).message).toMatch(/socket hang up|aborted/);
    hold.open();
    await waitFor(async () => (await effects(key)) === 1, { what: 'the effect committed' });

    const retry = await fetch(`${url}/things`, {
      method: 'POST',
      headers: { 'idempotency-key': key, 'content-type': 'text/plain' },
      body: 'payload',
    });
    expect(retry.status).toBe(201);
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(await retry.json()).toEqual({ key, bytes: 7 });
    expect(await effects(key)).toBe(1);
  });

  it('a handler that rejects: an empty 500 and onError; a body failing mid-stream: a cut connection', async () => {
    const errors: unknown[] = [];
    const url = await serve(
      async (request) => {
        if (new URL(request.url).pathname === '/throws') throw new Error('secret internals');
        let pulls = 0;
        const body = new ReadableStream<Uint8Array>({
          async pull(controller) {
            if (pulls++ === 0) controller.enqueue(new TextEncoder().encode('partial'));
            else {
              // After the head and the first bytes are on the wire.
              await new Promise((r) => setTimeout(r, 50));
              controller.error(new Error('export failed'));
            }
          },
        });
        return new Response(body, { status: 200 });
      },
      { onError: (error) => errors.push(error) },
    );
    const thrown = await fetch(`${url}/throws`);
    expect(thrown.status).toBe(500);
    expect(await thrown.text()).toBe('');
    expect(errors).toEqual([expect.objectContaining({ message: 'secret internals' })]);

    const cut = await fetch(`${url}/cut`);
    expect(cut.status).toBe(200);
    // Never a clean end: the client can tell the body is incomplete.
    await expect(cut.text()).rejects.toThrow();
  });
});

describe('examples/http-node.ts', () => {
  it('charges once per key and replays the stored answer; other routes claim nothing', async () => {
    const exampleDb = await createExampleDatabase('http_node');
    const abort = new AbortController();
    let listening = (_url: string): void => undefined;
    const ready = new Promise<string>((resolve) => (listening = resolve));
    const done = example.main({
      signal: abort.signal,
      env: { DATABASE_URL: exampleDb.url, PORT: '0' },
      onListening: (url) => listening(url),
    });
    try {
      const url = await Promise.race([ready, done.then(() => '')]);
      const key = randomUUID();
      const charge = () =>
        fetch(`${url}/charges`, {
          method: 'POST',
          headers: {
            'idempotency-key': key,
            'x-tenant': 'acme',
            'content-type': 'application/json',
          },
          body: JSON.stringify({ customerId: 'cus_1', amountCents: 1999 }),
        });
      const first = await charge();
      const again = await charge();
      expect(first.status).toBe(201);
      expect(again.headers.get('idempotent-replayed')).toBe('true');
      expect(await again.text()).toBe(await first.text());
      const elsewhere = await fetch(`${url}/refunds`, {
        method: 'POST',
        headers: { 'idempotency-key': key },
      });
      expect(elsewhere.status).toBe(404);
      const { rows } = await exampleDb.pool.query<{ n: number }>(
        'SELECT count(*)::int AS n FROM charges',
      );
      expect(rows[0]?.n).toBe(1);
    } finally {
      abort.abort();
      await done;
      await exampleDb.drop();
    }
  });
});
