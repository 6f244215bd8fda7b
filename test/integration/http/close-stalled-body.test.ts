/**
 * docs/http.md (Shutdown): "`close()` resolves within `timeoutMs` and the round trips of
 * the cancels, whatever `lockTimeoutMs` is." A request whose body is still arriving (a slow or
 * stalled upload: a mobile client, a slowloris) is in flight while the core reads its
 * body, and so is one whose own hooks before the claim (`scope`, a webhook's `verify`)
 * have not settled. The hard stop ends both: the request is answered 503 `unavailable`
 * (nothing was claimed, the retry runs afresh) and close() does not wait for the client
 * or the hook.
 */
import http from 'node:http';
import net from 'node:net';
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from '@jest/globals';
import express from 'express';
import Fastify from 'fastify';
import { toNodeListener, type Idempotency, type IdempotencyOptions } from 'effectively-once/http';
import { idempotentExpress } from 'effectively-once/http/express';
import { idempotencyPlugin } from 'effectively-once/http/fastify';
import { CHARGE, completionFixture } from './completion-support.js';

const fixture = completionFixture('http_close_stalled_body');

/** Far past the grace (200 ms) and the cancels, far short of any server timeout. */
const BOUND_MS = 5000;

/** Whether `work` settled within BOUND_MS, and what it gave. */
async function withinBound<T>(work: Promise<T>): Promise<{ settled: boolean; value?: T }> {
  let timer: NodeJS.Timeout | undefined;
  const bound = new Promise<{ settled: false }>((resolve) => {
    timer = setTimeout(() => resolve({ settled: false }), BOUND_MS);
  });
  try {
    return await Promise.race([work.then((value) => ({ settled: true, value })), bound]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * A raw client that sends the head and 10 of the 100 bytes its Content-Length declares,
 * then stalls; `status` is the status code of whatever answer reaches it (0: none, the
 * connection closed first).
 */
async function stalledUpload(url: string, path: string): Promise<{ status: Promise<number> }> {
  const base = new URL(url);
  const socket = net.connect(Number(base.port), base.hostname);
  socket.on('error', () => undefined);
  fixture.later(async () => void socket.destroy());
  await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
  let received = '';
  const status = new Promise<number>((resolve) => {
    socket.on('data', (chunk: Buffer) => {
      received += chunk.toString('latin1');
      const line = /^HTTP\/1\.1 (\d{3})/.exec(received);
      if (line?.[1] !== undefined) resolve(Number(line[1]));
    });
    socket.on('close', () => resolve(0));
  });
  socket.write(
    `POST ${path} HTTP/1.1\r\nHost: ${base.host}\r\nContent-Type: application/json\r\n` +
      `Idempotency-Key: ${randomUUID()}\r\nContent-Length: 100\r\n\r\n{"amount":`,
  );
  return { status };
}

/** A node:http server around `listener`, telling when a request reached it. */
async function serve(
  listener: http.RequestListener,
): Promise<{ url: string; arrived: Promise<void> }> {
  let arrived!: () => void;
  const reached = new Promise<void>((resolve) => (arrived = resolve));
  const server = http.createServer((req, res) => {
    // The endpoint takes the request synchronously (it counts in flight from here).
    listener(req, res);
    arrived();
  });
  return { url: await fixture.listen(server), arrived: reached };
}

/** close({ timeoutMs: 200 }) with the stalled request in flight, and its answer. */
async function closeWhileStalled(
  idempotency: Idempotency,
  upload: { status: Promise<number> },
): Promise<{ closed: boolean; status: number | undefined }> {
  const closed = await withinBound(idempotency.close({ timeoutMs: 200 }));
  const answered = await withinBound(upload.status);
  return { closed: closed.settled, status: answered.value };
}

describe('close({ timeoutMs }) with a request body still arriving', () => {
  it('node listener: close() resolves past the grace; the upload is answered 503', async () => {
    const idempotency = fixture.endpoint();
    const { url, arrived } = await serve(
      toNodeListener(
        idempotency.handler(async (request, ctx) => {
          await request.text();
          await ctx.tx.query(CHARGE, [ctx.key, 'cus_ok', 'slow']);
          return new Response('ok', { status: 201 });
        }),
      ),
    );
    const upload = await stalledUpload(url, '/charges');
    await arrived;
    expect(await closeWhileStalled(idempotency, upload)).toEqual({ closed: true, status: 503 });
  });

  it('Express: close() resolves past the grace; the upload is answered 503', async () => {
    const idempotency = fixture.endpoint();
    const app = express();
    app.post(
      '/charges',
      idempotentExpress(idempotency, async (_req, res, { tx, key }) => {
        await tx.query(CHARGE, [key, 'cus_ok', 'slow']);
        res.status(201).json({ ok: true });
      }),
    );
    const { url, arrived } = await serve(app);
    const upload = await stalledUpload(url, '/charges');
    await arrived;
    expect(await closeWhileStalled(idempotency, upload)).toEqual({ closed: true, status: 503 });
  });

  it('webhook on the node listener: close() resolves past the grace; answered 503', async () => {
    const idempotency = fixture.endpoint();
    const { url, arrived } = await serve(
      toNodeListener(
        idempotency.webhook(
          {
            source: { name: 'stalled', describe: 'Idempotency-Key header', deliveryId: () => 'd' },
            verify: false,
          },
          () => undefined,
        ),
      ),
    );
    const upload = await stalledUpload(url, '/hook');
    await arrived;
    expect(await closeWhileStalled(idempotency, upload)).toEqual({ closed: true, status: 503 });
  });

  it('Fastify reads the body itself: close() does not wait for the upload', async () => {
    const idempotency = fixture.endpoint();
    // As docs/http.md advises: Fastify's own close() would wait for the open request.
    const fastify = Fastify({ forceCloseConnections: true });
    await fastify.register(idempotencyPlugin, { idempotency });
    let ran = 0;
    fastify.post('/charges', async () => ({ ran: ++ran }));
    await fastify.listen({ port: 0, host: '127.0.0.1' });
    fixture.later(() => fastify.close());
    const address = fastify.server.address();
    if (address === null || typeof address === 'string') throw new Error('not on TCP');
    const upload = await stalledUpload(`http://127.0.0.1:${address.port}`, '/charges');
    const closed = await withinBound(idempotency.close({ timeoutMs: 200 }));
    const appClosed = await withinBound(fastify.close());
    // The connection is ended, unanswered, and the route never ran.
    expect({
      closed: closed.settled,
      appClosed: appClosed.settled,
      status: await upload.status,
      ran,
    }).toEqual({ closed: true, appClosed: true, status: 0, ran: 0 });
  });
});

describe('close({ timeoutMs }) with a hook before the claim that never settles', () => {
  const never = (): Promise<never> => new Promise<never>(() => undefined);

  async function closeWhilePending(
    options: Partial<IdempotencyOptions>,
    handle: (idempotency: Idempotency) => (request: Request) => Promise<Response>,
  ): Promise<{ closed: boolean; status: number | undefined; code: unknown }> {
    const idempotency = fixture.endpoint(options);
    const request = new Request('http://localhost/charges', {
      method: 'POST',
      headers: { 'idempotency-key': randomUUID(), 'content-type': 'application/json' },
      body: '{"amount":1}',
    });
    const answer = handle(idempotency)(request);
    const closed = await withinBound(idempotency.close({ timeoutMs: 200 }));
    const answered = await withinBound(answer);
    const response = answered.value;
    const body =
      response === undefined ? undefined : ((await response.json()) as { code?: unknown });
    return { closed: closed.settled, status: response?.status, code: body?.code };
  }

  it('a scope function: close() resolves; the request is answered 503 EO_SHUTDOWN', async () => {
    const outcome = await closeWhilePending({ scope: never }, (idempotency) =>
      idempotency.handler(() => new Response('ran', { status: 201 })),
    );
    expect(outcome).toEqual({ closed: true, status: 503, code: 'EO_SHUTDOWN' });
  });

  it('a scope function settling after the hard stop: its request never runs', async () => {
    let settle!: (scope: string) => void;
    const scope = new Promise<string>((resolve) => (settle = resolve));
    let scopeAsked!: () => void;
    const asked = new Promise<void>((resolve) => (scopeAsked = resolve));
    let ran = 0;
    const idempotency = fixture.endpoint({
      scope: () => {
        scopeAsked();
        return scope;
      },
    });
    const answer = idempotency.handler(() => {
      ran++;
      return new Response('ran', { status: 201 });
    })(
      new Request('http://localhost/charges', {
        method: 'POST',
        headers: { 'idempotency-key': randomUUID() },
        body: '{}',
      }),
    );
    await asked;
    await idempotency.close({ timeoutMs: 50 });
    expect((await answer).status).toBe(503);
    settle('ledger');
    // Whatever the scope's late answer would start has had its turns to start by now.
    for (let turn = 0; turn < 20; turn++) await new Promise((resolve) => setImmediate(resolve));
    expect(ran).toBe(0);
  });

  it("a webhook's verify: close() resolves; the delivery is answered 503 EO_SHUTDOWN", async () => {
    const outcome = await closeWhilePending({}, (idempotency) =>
      idempotency.webhook(
        {
          source: { name: 'slow', describe: 'Idempotency-Key header', deliveryId: () => 'd' },
          verify: never,
        },
        () => undefined,
      ),
    );
    expect(outcome).toEqual({ closed: true, status: 503, code: 'EO_SHUTDOWN' });
  });

  it("a web Request's body that never ends: close() resolves; answered 503 EO_SHUTDOWN", async () => {
    const outcome = await closeWhilePending({}, (idempotency) => {
      const handle = idempotency.handler(() => new Response('ran', { status: 201 }));
      return (request) => {
        const stalled = new ReadableStream<Uint8Array>({
          start: (controller) => controller.enqueue(new TextEncoder().encode('{"amount":')),
        });
        return handle(
          new Request(request.url, {
            method: 'POST',
            headers: request.headers,
            body: stalled,
            duplex: 'half',
          }),
        );
      };
    });
    expect(outcome).toEqual({ closed: true, status: 503, code: 'EO_SHUTDOWN' });
  });
});
