/**
 * Wrong SQS endpoints and queue URLs, against ElasticMQ. The unit tests check the same
 * paths against a fake (test/unit/sqs/source.test.ts); these use the real emulator's answers.
 */
import net from 'node:net';
import { describe, expect, it } from '@jest/globals';
import { CreateQueueCommand, DeleteQueueCommand, SQSClient } from '@aws-sdk/client-sqs';
import { ConfigurationError } from '../../../src/index.js';
import { sqsSource } from '../../../adapters/sqs/index.js';
import { sqsEndpoint } from '../../helpers/env.js';
import { waitFor } from '../../helpers/wait-for.js';
import { TIMEOUT, badInputSuite, keyAttribute } from './harness.js';

const suite = badInputSuite('sqs_endpoints');

function missingQueueUrl(name: string): string {
  return `${sqsEndpoint()}/000000000000/${name}-${Date.now().toString(36)}`;
}

/** A loopback port nothing listens on. */
async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

describe('wrong SQS endpoints and queue URLs', () => {
  it('a queue URL that is not a URL is refused at construction with EO_CONFIGURATION', () => {
    for (const queueUrl of ['orders', '', '/000000000000/orders']) {
      let error: unknown;
      try {
        sqsSource({ client: suite.queues.client, queueUrl });
      } catch (e) {
        error = e;
      }
      expect(error).toBeInstanceOf(ConfigurationError);
      expect(error).toMatchObject({
        code: 'EO_CONFIGURATION',
        retryable: false,
        details: { option: 'queueUrl' },
      });
    }
  });

  it(
    'a queue that does not exist: the start-up check fails the receive loop fast with a non-retryable EO_BROKER error',
    async () => {
      const queueUrl = missingQueueUrl('missing');
      const worker = await suite.sqsWorker({ queueUrl, key: 'Idempotency-Key' });
      await expect(worker.consumer.done).resolves.toBeUndefined();
      expect(worker.errors.map((e) => [e.code, e.retryable, e.details])).toEqual([
        [
          'EO_BROKER',
          false,
          expect.objectContaining({
            operation: 'get queue attributes',
            queueUrl,
            reason: 'queue does not exist',
          }),
        ],
      ]);
      expect(worker.consumer.stats().received).toBe(0);
    },
    TIMEOUT,
  );

  it(
    'a dead-letter queue that does not exist fails the start-up check the same way',
    async () => {
      const { url } = await suite.queues.create('dlq-missing');
      const deadLetterQueueUrl = missingQueueUrl('missing-dlq');
      const worker = await suite.sqsWorker({
        queueUrl: url,
        key: 'Idempotency-Key',
        deadLetterQueueUrl,
      });
      await expect(worker.consumer.done).resolves.toBeUndefined();
      expect(
        worker.errors.map((e) => [e.code, e.retryable, e.details['queueUrl'], e.details['reason']]),
      ).toEqual([['EO_BROKER', false, deadLetterQueueUrl, 'queue does not exist']]);
    },
    TIMEOUT,
  );

  it(
    'without the start-up check, a missing queue is reported on every receive (with backoff) and served once it exists',
    async () => {
      const name = `late-${Date.now().toString(36)}`;
      const queueUrl = `${sqsEndpoint()}/000000000000/${name}`;
      const worker = await suite.sqsWorker({
        queueUrl,
        key: 'Idempotency-Key',
        verifyQueue: false,
        pollErrorBackoff: { initialMs: 50, maxMs: 200 },
      });
      await waitFor(() => worker.errors.length >= 3, { what: 'receive errors' });
      expect(worker.errors[0]).toMatchObject({
        code: 'EO_BROKER',
        details: { operation: 'receive', queueUrl, reason: 'queue does not exist' },
      });
      const created = await suite.queues.client.send(new CreateQueueCommand({ QueueName: name }));
      try {
        expect(created.QueueUrl).toBe(queueUrl);
        await suite.queues.send(queueUrl, JSON.stringify({ id: 'late' }), {
          MessageAttributes: keyAttribute('late'),
        });
        await waitFor(() => worker.consumer.stats().processed === 1, {
          what: 'the message on the late queue',
        });
        expect(await suite.effects()).toEqual([{ key: 'late', message: { id: 'late' } }]);
      } finally {
        await worker.consumer.stop({ timeoutMs: 2000 });
        await suite.queues.client.send(new DeleteQueueCommand({ QueueUrl: queueUrl }));
      }
    },
    TIMEOUT,
  );

  it(
    'an endpoint nobody listens on: retryable EO_BROKER errors, the consumer keeps trying and stops cleanly',
    async () => {
      const client = new SQSClient({
        region: 'us-east-1',
        endpoint: `http://127.0.0.1:${await closedPort()}`,
        credentials: { accessKeyId: 'x', secretAccessKey: 'x' },
        maxAttempts: 1,
      });
      try {
        const worker = await suite.sqsWorker({
          client,
          queueUrl: missingQueueUrl('unreachable'),
          pollErrorBackoff: { initialMs: 50, maxMs: 200 },
        });
        await waitFor(() => worker.errors.length >= 3, { what: 'repeated errors' });
        expect(new Set(worker.errors.map((e) => `${e.code}/${e.retryable}`))).toEqual(
          new Set(['EO_BROKER/true']),
        );
        let ended = false;
        void worker.consumer.done.then(() => (ended = true));
        await new Promise((r) => setTimeout(r, 200));
        expect(ended).toBe(false);
        await worker.consumer.stop({ timeoutMs: 2000 });
        expect(ended).toBe(true);
      } finally {
        client.destroy();
      }
    },
    TIMEOUT,
  );
});
