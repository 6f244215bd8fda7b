/**
 * docs/client.md: what `onRetry`'s `error` (and RetriesExhaustedError's `cause`) is
 * when an attempt gets no response: fetch's `TypeError: fetch failed`, with the reason
 * in `cause` and its code in `cause.code`; a timeout's `TimeoutError`. Real sockets on
 * loopback: a closed port, a server that closes or resets the connection, one that
 * never answers.
 */
import net from 'node:net';
import { describe, expect, it } from '@jest/globals';
import { RetriesExhaustedError, idempotentFetch, type RetryEvent } from 'effectively-once/client';
import { freePorts } from '../../../kit/services/ports.js';
import { FAST, cleanupAfterEach, onCleanup } from './support.js';

cleanupAfterEach();

/** A port nothing listens on: bound once, then closed. */
const closedPort = async (): Promise<number> => (await freePorts(1))[0] ?? 0;

/** A TCP server that reads the request and then does `onRequest` to the connection. */
async function rudeServer(onRequest: (socket: net.Socket) => void): Promise<number> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => undefined);
    socket.once('data', () => onRequest(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  onCleanup(async () => {
    for (const s of sockets) s.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return (server.address() as net.AddressInfo).port;
}

/** Two attempts at `port`: the one retry event and the final error. */
async function twoAttempts(port: number, attemptTimeoutMs?: number) {
  const retries: RetryEvent[] = [];
  const error = await idempotentFetch(
    `http://127.0.0.1:${port}/charges`,
    { method: 'POST' },
    {
      json: { amountCents: 100 },
      attempts: 2,
      ...FAST,
      ...(attemptTimeoutMs === undefined ? {} : { attemptTimeoutMs }),
      onRetry: (event) => retries.push(event),
    },
  ).catch((e: unknown) => e);
  expect(error).toBeInstanceOf(RetriesExhaustedError);
  expect(retries).toHaveLength(1);
  expect(retries[0]?.status).toBeUndefined();
  return { event: retries[0]?.error, final: (error as RetriesExhaustedError).cause };
}

describe("onRetry's error when an attempt got no response", () => {
  it.each([
    ['nothing listens on the port', 'ECONNREFUSED', closedPort],
    [
      'the server closes the connection without answering',
      'UND_ERR_SOCKET',
      () => rudeServer((socket) => socket.destroy()),
    ],
    [
      'the server resets the connection',
      'ECONNRESET',
      () => rudeServer((socket) => socket.resetAndDestroy()),
    ],
  ])('%s: TypeError "fetch failed", cause.code %s', async (_what, code, listen) => {
    const { event, final } = await twoAttempts(await listen());
    for (const error of [event, final]) {
      // Node's own TypeError (fetch runs outside the test's realm): compared by name.
      expect(error).toMatchObject({ name: 'TypeError', message: 'fetch failed', cause: { code } });
    }
  });

  it('no response headers within attemptTimeoutMs: a TimeoutError', async () => {
    const port = await rudeServer(() => undefined); // reads, never answers
    const { event, final } = await twoAttempts(port, 200);
    for (const error of [event, final]) {
      expect(error).toMatchObject({ name: 'TimeoutError', message: 'Attempt exceeded 200 ms' });
      expect((error as Error).constructor.name).toBe('DOMException');
    }
  });
});
