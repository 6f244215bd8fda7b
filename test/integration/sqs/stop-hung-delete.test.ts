/**
 * `stop({ timeoutMs })` while an ack (DeleteMessageBatch) hangs: SQS reachable
 * for the receive, but the delete's request is never answered (a black-holed
 * connection; the AWS SDK's default request timeout is none). The docs promise that
 * stop() gives up on what is still running at its deadline and resolves ("no handler
 * can hold stop() open"; "it resolves by the deadline even when the broker client is
 * slow"). The dispatcher waits for every settlement, acks included, with no deadline:
 * stop() never resolves. It must resolve by its deadline and cancel the request.
 *
 * The black hole is a loopback HTTP proxy in front of ElasticMQ that forwards every
 * request except DeleteMessageBatch, which it accepts and never answers.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, describe, expect, it } from '@jest/globals';
import { SQSClient } from '@aws-sdk/client-sqs';
import { sqsEndpoint } from '../../helpers/env.js';
import { waitFor } from '../../helpers/wait-for.js';
import { TIMEOUT, sqsIntegration } from './harness.js';

const it_ = sqsIntegration('stop-hung-delete');

const held: http.ServerResponse[] = [];
let blackHole = true;
/** Held requests whose connection the client let go of (the SDK cancelled them). */
let cancelled = 0;
const proxy = http.createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const target = String(req.headers['x-amz-target'] ?? '');
    if (
      blackHole &&
      (target.endsWith('.DeleteMessageBatch') || target.endsWith('.DeleteMessage'))
    ) {
      held.push(res); // accepted, never answered
      res.on('close', () => cancelled++);
      return;
    }
    const upstream = new URL(req.url ?? '/', sqsEndpoint());
    const headers = { ...req.headers };
    delete headers.host;
    const forward = http.request(
      upstream,
      { method: req.method, headers: { ...headers, host: upstream.host } },
      (answer) => {
        res.writeHead(answer.statusCode ?? 500, answer.headers);
        answer.pipe(res);
      },
    );
    forward.on('error', () => res.destroy());
    forward.end(Buffer.concat(chunks));
  });
});

afterAll(async () => {
  for (const res of held) res.destroy();
  proxy.closeAllConnections();
  await new Promise<void>((resolve) => proxy.close(() => resolve()));
});

describe('SQS: stop() while a delete is never answered', () => {
  it(
    'resolves by its deadline',
    async () => {
      await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', () => resolve()));
      const port = (proxy.address() as AddressInfo).port;
      const { url } = await it_.queues.create('hung-delete');
      await it_.queues.send(url, JSON.stringify({ id: 'm1' }));
      // The SDK sends to the queue URL's host: point both at the proxy.
      const viaProxy = new URL(url);
      viaProxy.host = `127.0.0.1:${port}`;
      const client = new SQSClient({
        region: 'us-east-1',
        endpoint: `http://127.0.0.1:${port}`,
        credentials: { accessKeyId: 'x', secretAccessKey: 'x' },
      });
      const consumer = await it_.worker({ queueUrl: viaProxy.toString(), client });
      await waitFor(() => consumer.stats().processed === 1 && held.length > 0, {
        what: 'm1 committed and its delete sent (and held)',
        timeoutMs: 30_000,
      });
      const STOP_MS = 1000;
      const bound = 15_000; // far past the deadline
      const stopping = consumer.stop({ timeoutMs: STOP_MS }).then(() => 'stopped' as const);
      try {
        const outcome = await Promise.race([
          stopping,
          new Promise<'still waiting'>((r) => setTimeout(() => r('still waiting'), bound).unref()),
        ]);
        expect(outcome).toBe('stopped');
        // Given up on, not waited for: reported as a failed ack (redelivered: a duplicate),
        // and the request itself cancelled (the SDK has no timeout of its own here).
        expect(consumer.stats().ackFailures).toBe(1);
        await waitFor(() => cancelled === held.length, {
          what: 'the held delete cancelled by the client',
          timeoutMs: 10_000,
        });
      } finally {
        // Let go of the held deletes (their connections reset) so the test can end.
        blackHole = false;
        for (const res of held.splice(0)) res.destroy();
        await stopping;
        client.destroy();
      }
    },
    TIMEOUT,
  );
});
