/**
 * Issue 32, defect 1: a FIFO dead-letter queue deduplicates what it is sent. Two FIFO
 * sources sharing one FIFO DLQ, each holding a copy of one event with the same
 * MessageDeduplicationId (an SNS FIFO fan-out), are two dead letters: the DLQ must
 * store both before either original is deleted. Sending the same original twice (a
 * crash after the send, before the delete) must still store it once.
 *
 * ElasticMQ 1.6.11 deduplicates a FIFO queue's MessageDeduplicationId queue-wide
 * within its 5-minute window (the first test shows it), which is what makes the
 * collision observable here.
 */
import { describe, expect, it } from '@jest/globals';
import { ReceiveMessageCommand, type Message } from '@aws-sdk/client-sqs';
import { HandlerError } from '../../../src/errors.js';
import { withDedup } from '../../../adapters/sqs/index.js';
import { sendToDeadLetterQueue } from '../../../adapters/sqs/dead-letter.js';
import { waitFor } from '../../helpers/wait-for.js';
import { TIMEOUT, sqsIntegration } from './harness.js';

const it_ = sqsIntegration('fifo_dead_letters');

/** Receives one message with its system attributes (what sqsSource and sqs-consumer see). */
async function receiveOne(url: string): Promise<Message> {
  const out = await it_.queues.client.send(
    new ReceiveMessageCommand({
      QueueUrl: url,
      MaxNumberOfMessages: 1,
      WaitTimeSeconds: 1,
      VisibilityTimeout: 30,
      MessageAttributeNames: ['All'],
      MessageSystemAttributeNames: ['All'],
    }),
  );
  const [message] = out.Messages ?? [];
  if (message === undefined) throw new Error(`nothing to receive on ${url}`);
  return message;
}

/** Two FIFO sources and one FIFO DLQ; each source holds a copy of event `evt-1`. */
async function fannedOut(body: string): Promise<{ sources: string[]; dlq: string }> {
  const { url: dlq } = await it_.queues.create('shared-dlq', { fifo: true });
  const sources: string[] = [];
  for (const name of ['orders', 'billing']) {
    const { url } = await it_.queues.create(name, { fifo: true, visibilityTimeout: 30 });
    await it_.queues.send(url, body, { MessageGroupId: 'g', MessageDeduplicationId: 'evt-1' });
    sources.push(url);
  }
  return { sources, dlq };
}

describe('FIFO dead-letter queue shared by two FIFO sources', () => {
  it(
    'the same original sent twice is stored once (ElasticMQ deduplicates within 5 minutes)',
    async () => {
      const { url: source } = await it_.queues.create('once', { fifo: true });
      const { url: dlq } = await it_.queues.create('once-dlq', { fifo: true });
      await it_.queues.send(source, 'poison', { MessageGroupId: 'g', MessageDeduplicationId: 'e' });
      const message = await receiveOne(source);
      const reason = new HandlerError('e', 1, new Error('poison'));
      // A crash after the first send and before the delete: the redelivery sends it again.
      await sendToDeadLetterQueue(it_.queues.client, dlq, source, message, reason);
      await sendToDeadLetterQueue(it_.queues.client, dlq, source, message, reason);
      expect((await it_.queues.drain(dlq)).map((m) => m.Body)).toEqual(['poison']);
    },
    TIMEOUT,
  );

  it(
    'sqsSource: one event fanned out to both, poison in both, is two dead letters',
    async () => {
      const { sources, dlq } = await fannedOut('not json');
      const deadLettered: string[] = [];
      for (const queueUrl of sources) {
        const consumer = await it_.worker({ queueUrl, deadLetterQueueUrl: dlq });
        consumer.on('dead-lettered', () => deadLettered.push(queueUrl));
      }
      await waitFor(() => deadLettered.length === 2, { what: 'both dead-lettered' });
      for (const url of sources)
        await waitFor(async () => (await it_.queues.depth(url)).total === 0, {
          what: `original deleted from ${url}`,
        });
      const letters = await it_.queues.drain(dlq);
      const from = letters.map(
        (m) =>
          (
            JSON.parse(m.MessageAttributes!['EffectivelyOnce-Error']!.StringValue!) as {
              queueUrl: string;
            }
          ).queueUrl,
      );
      expect(from.sort()).toEqual([...sources].sort());
    },
    TIMEOUT,
  );

  it(
    'withDedup: one event fanned out to both, poison in both, is two dead letters',
    async () => {
      const { sources, dlq } = await fannedOut(JSON.stringify({ id: 'evt-1' }));
      const moved: string[] = [];
      for (const queueUrl of sources) {
        const worker = withDedup(
          async () => {
            throw new Error('poison');
          },
          {
            name: `dlq-${sources.indexOf(queueUrl)}`,
            pool: it_.db.pool,
            schema: it_.db.schema,
            client: it_.queues.client,
            queueUrl,
            deadLetterQueueUrl: dlq,
            maxAttempts: 1,
          },
        );
        try {
          const message = await receiveOne(queueUrl);
          // Resolving with the message is sqs-consumer's cue to delete the original.
          if ((await worker.handleMessage(message)) === message) moved.push(queueUrl);
        } finally {
          await worker.stop();
        }
      }
      expect(moved).toEqual(sources);
      expect(await it_.queues.drain(dlq)).toHaveLength(2);
    },
    TIMEOUT,
  );
});
