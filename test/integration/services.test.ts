/**
 * Smoke test for the integration services themselves: if this fails, every
 * other integration failure is noise. Each service does one real round trip.
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, test } from '@jest/globals';
import {
  CreateQueueCommand,
  DeleteMessageCommand,
  DeleteQueueCommand,
  GetQueueAttributesCommand,
  GetQueueUrlCommand,
  ReceiveMessageCommand,
  SendMessageCommand,
  SQSClient,
} from '@aws-sdk/client-sqs';
import { Kafka, logLevel, Partitioners } from 'kafkajs';
import pg from 'pg';
import { databaseUrl, kafkaBrokers, sqsEndpoint } from '../helpers/env.js';
import { PRESET_QUEUES, SQS_CREDENTIALS, SQS_REGION } from '../../kit/services/index.js';

// Explicit: a project-level testTimeout in jest.config.js is not applied (it is a global option).
const TIMEOUT = 60_000;

describe('Postgres', () => {
  test(
    'answers queries',
    async () => {
      const client = new pg.Client({ connectionString: databaseUrl() });
      await client.connect();
      try {
        const one = await client.query<{ one: number }>('select 1 as one');
        expect(one.rows[0]?.one).toBe(1);
        const version = await client.query<{ server_version_num: string }>(
          'show server_version_num',
        );
        expect(Number(version.rows[0]?.server_version_num)).toBeGreaterThanOrEqual(130000);
        // The CI lane that asks for another major (EO_PG_VERSION=18) really runs it.
        const wanted = process.env['EO_PG_VERSION'];
        if (wanted)
          expect(Math.floor(Number(version.rows[0]?.server_version_num) / 10000)).toBe(
            Number(wanted),
          );
      } finally {
        await client.end();
      }
    },
    TIMEOUT,
  );
});

describe('SQS emulator', () => {
  const sqs = (): SQSClient =>
    new SQSClient({ region: SQS_REGION, endpoint: sqsEndpoint(), credentials: SQS_CREDENTIALS });

  test.each([
    ['standard', false],
    ['FIFO', true],
  ])(
    '%s queue: create, send, receive, delete',
    async (_kind, fifo) => {
      const client = sqs();
      const name = `smoke-${randomUUID()}${fifo ? '.fifo' : ''}`;
      const { QueueUrl } = await client.send(
        new CreateQueueCommand({ QueueName: name, Attributes: fifo ? { FifoQueue: 'true' } : {} }),
      );
      try {
        const body = `hello ${randomUUID()}`;
        await client.send(
          new SendMessageCommand({
            QueueUrl,
            MessageBody: body,
            ...(fifo ? { MessageGroupId: 'g', MessageDeduplicationId: randomUUID() } : {}),
          }),
        );
        const received = await client.send(
          new ReceiveMessageCommand({ QueueUrl, WaitTimeSeconds: 5, MaxNumberOfMessages: 1 }),
        );
        const message = received.Messages?.[0];
        expect(message?.Body).toBe(body);
        await client.send(
          new DeleteMessageCommand({ QueueUrl, ReceiptHandle: message?.ReceiptHandle }),
        );
      } finally {
        await client.send(new DeleteQueueCommand({ QueueUrl }));
        client.destroy();
      }
    },
    TIMEOUT,
  );
});

describe('SQS preset queues', () => {
  test.each(Object.values(PRESET_QUEUES))(
    '$name redrives to $dlq',
    async ({ name, dlq, maxReceiveCount }) => {
      const client = new SQSClient({
        region: SQS_REGION,
        endpoint: sqsEndpoint(),
        credentials: SQS_CREDENTIALS,
      });
      try {
        const { QueueUrl } = await client.send(new GetQueueUrlCommand({ QueueName: name }));
        const { Attributes } = await client.send(
          new GetQueueAttributesCommand({ QueueUrl, AttributeNames: ['All'] }),
        );
        const redrive = JSON.parse(Attributes?.RedrivePolicy ?? '{}') as Record<string, unknown>;
        expect(String(redrive['deadLetterTargetArn'])).toMatch(
          new RegExp(`:${dlq.replace('.', '\\.')}$`),
        );
        expect(Number(redrive['maxReceiveCount'])).toBe(maxReceiveCount);
        expect(Attributes?.FifoQueue === 'true').toBe(name.endsWith('.fifo'));
        await client.send(new GetQueueUrlCommand({ QueueName: dlq }));
      } finally {
        client.destroy();
      }
    },
    TIMEOUT,
  );
});

describe('Kafka', () => {
  test(
    'create topic, produce, consume',
    async () => {
      const kafka = new Kafka({
        clientId: 'services-smoke',
        brokers: kafkaBrokers(),
        logLevel: logLevel.WARN,
      });
      const topic = `smoke-${randomUUID()}`;
      const admin = kafka.admin();
      const producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner });
      const consumer = kafka.consumer({ groupId: `smoke-${randomUUID()}` });
      try {
        await admin.connect();
        expect(
          await admin.createTopics({ topics: [{ topic, numPartitions: 1 }], waitForLeaders: true }),
        ).toBe(true);

        const value = `hello ${randomUUID()}`;
        await producer.connect();
        await producer.send({ topic, messages: [{ key: 'k', value }] });

        await consumer.connect();
        await consumer.subscribe({ topic, fromBeginning: true });
        const consumed = new Promise<string>((resolve) => {
          void consumer.run({
            eachMessage: ({ message }) => Promise.resolve(resolve(message.value?.toString() ?? '')),
          });
        });
        expect(await consumed).toBe(value);
      } finally {
        await consumer.disconnect();
        await producer.disconnect();
        await admin.disconnect();
      }
    },
    TIMEOUT,
  );
});
