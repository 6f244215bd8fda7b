/**
 * An answer whose body fails after its head went out (after COMMIT) is cut, the socket
 * destroyed, never ended cleanly: the client sees an incomplete response and retries,
 * and the retry gets the replay. The web core on Hono and on plain node:http (the
 * adapters' bridge); Fastify's stream payloads are in fastify-completion.test.ts.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { describe, it, jest } from '@jest/globals';
import { Hono } from 'hono';
import type { Idempotency, IdempotentHandler } from 'effectively-once/http';
import { requestUrl, sendResponse, webRequest } from '../../../src/http/node-bridge.js';
import { CHARGE, completionFixture, expectCutThenReplayed } from './completion-support.js';

const fixture = completionFixture('http_cut');

/** A first row, then (read after COMMIT) a failure. */
const failingExport: IdempotentHandler = async (_request, ctx) => {
  await ctx.tx.query(CHARGE, [ctx.key, 'cus_ok', 'export']);
  let pulls = 0;
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      if (++pulls === 1) controller.enqueue(new TextEncoder().encode('row 1\n'));
      else {
        await new Promise((resolve) => setTimeout(resolve, 10));
        controller.error(new Error('the export source went away'));
      }
    },
  });
  return ctx.streamed(new Response(body, { headers: { 'content-type': 'text/csv' } }));
};

async function onHono(idempotency: Idempotency): Promise<string> {
  // @hono/node-server logs the stream's error before it destroys the socket.
  const logged = jest.spyOn(console, 'error').mockImplementation(() => undefined);
  fixture.later(async () => logged.mockRestore());
  const app = new Hono();
  const endpoint = idempotency.handler(failingExport);
  app.post('/export', (c) => endpoint(c.req.raw));
  const server = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' });
  await new Promise<void>((resolve) => server.once('listening', resolve));
  fixture.later(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/export`;
}

async function onNodeHttp(idempotency: Idempotency): Promise<string> {
  const endpoint = idempotency.handler(failingExport);
  const server = http.createServer((req, res) => {
    const url = requestUrl('http', req.headers.host, req.url ?? '/');
    void endpoint(webRequest(url, req.method ?? 'GET', req.headers, req)).then((response) =>
      sendResponse(response, res),
    );
  });
  return `${await fixture.listen(server)}/export`;
}

describe.each([
  ['Hono', onHono],
  ['node:http', onNodeHttp],
] as const)('the web core on %s: a body failing after COMMIT', (_name, start) => {
  it('cuts the response; the effect committed once; the retry gets the replay', async () => {
    await expectCutThenReplayed(fixture, await start(fixture.endpoint()));
  });
});
