import {
  DeleteMessageBatchCommand,
  ReceiveMessageCommand,
  type Message,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import { Consumer } from 'sqs-consumer';
import { sqsSource } from 'effectively-once/sqs';
import type { RunContext } from '../context.js';
import { insertCharge } from '../effect.js';
import { runEffectivelyOnce, STALL_MS } from '../eo-consumer.js';
import { InboxProgress, runInboxWorkers, storeInInbox } from '../inbox.js';
import { decodeMessage, type BenchMessage } from '../message.js';

export interface SqsTarget {
  client: SQSClient;
  queueUrl: string;
}

export type SqsScenario = 'a' | 'b' | 'c' | 'd' | 'f';
type Runner = (ctx: RunContext, target: SqsTarget) => Promise<void>;

/**
 * `concurrency` plain `sqs-consumer` instances (batchSize 10, `handleMessage`, one
 * DeleteMessage per message, as the library does), sharing the pool. `onAck` runs once
 * sqs-consumer deleted the message.
 */
async function runSqsConsumers(
  ctx: RunContext,
  { client, queueUrl }: SqsTarget,
  handle: (message: BenchMessage, body: string) => Promise<void>,
  onAck: (id: number) => void,
): Promise<void> {
  const consumers = Array.from({ length: ctx.concurrency }, () =>
    Consumer.create({
      queueUrl,
      sqs: client,
      batchSize: 10,
      waitTimeSeconds: 1,
      handleMessage: async (message: Message) => {
        ctx.drain.start();
        const body = message.Body ?? '';
        await handle(decodeMessage(body), body);
        return message;
      },
    }),
  );
  for (const consumer of consumers) {
    consumer.on('message_processed', (message) => onAck(decodeMessage(message.Body).id));
    consumer.on('error', (error) => ctx.drain.fail(error));
    consumer.on('processing_error', (error) => ctx.drain.fail(error));
    consumer.start();
  }
  try {
    await ctx.drain.wait(STALL_MS);
  } finally {
    for (const consumer of consumers) consumer.stop({ abort: true });
  }
}

/**
 * Scenario d: `concurrency` loops of ReceiveMessage(10) + DeleteMessageBatch, no
 * database. Each loop's next receive overlaps its previous delete (at most one delete
 * in flight per loop), so this is what the broker and the client can do.
 */
async function brokerCeiling(ctx: RunContext, { client, queueUrl }: SqsTarget): Promise<void> {
  const { drain } = ctx;
  const deleteAll = async (messages: Message[]): Promise<void> => {
    const out = await client.send(
      new DeleteMessageBatchCommand({
        QueueUrl: queueUrl,
        Entries: messages.map((m, i) => ({ Id: String(i), ReceiptHandle: m.ReceiptHandle })),
      }),
    );
    if (out.Failed !== undefined && out.Failed.length > 0)
      throw new Error(`DeleteMessageBatch failed: ${out.Failed[0]?.Message}`);
    const now = Date.now();
    for (const m of messages) {
      const body = decodeMessage(m.Body);
      drain.done(body.id, now - body.sentAt);
    }
  };
  const loop = async (): Promise<void> => {
    let deleting: Promise<void> = Promise.resolve();
    while (!drain.signal.aborted) {
      let messages: Message[];
      try {
        const out = await client.send(
          new ReceiveMessageCommand({
            QueueUrl: queueUrl,
            MaxNumberOfMessages: 10,
            WaitTimeSeconds: 1,
          }),
          { abortSignal: drain.signal },
        );
        messages = out.Messages ?? [];
      } catch (error) {
        if (drain.signal.aborted) break;
        throw error;
      }
      if (messages.length === 0) continue;
      drain.start();
      await deleting;
      deleting = deleteAll(messages);
      deleting.catch(() => undefined); // awaited on the next turn; not an unhandled rejection meanwhile
    }
    await deleting;
  };
  const loops = Promise.all(Array.from({ length: ctx.concurrency }, loop));
  loops.catch((error: unknown) => drain.fail(error));
  await drain.wait(STALL_MS);
  await loops;
}

/** b and c's source: as many receive loops as (a) runs sqs-consumer instances and (d) runs loops. */
const source = (ctx: RunContext, { client, queueUrl }: SqsTarget) =>
  sqsSource<BenchMessage>({
    client,
    queueUrl,
    parse: decodeMessage,
    receiveConcurrency: ctx.concurrency,
  });

export const sqsScenarios: Record<SqsScenario, Runner> = {
  a: (ctx, target) =>
    runSqsConsumers(
      ctx,
      target,
      (message) => insertCharge(ctx.pool, message),
      (id) => ctx.drain.done(id),
    ),
  b: (ctx, target) => runEffectivelyOnce(ctx, source(ctx, target), 'per-message'),
  c: (ctx, target) => runEffectivelyOnce(ctx, source(ctx, target), 'batch'),
  d: brokerCeiling,
  f: async (ctx, target) => {
    const progress = new InboxProgress(ctx);
    const workers = runInboxWorkers(ctx, progress);
    workers.catch((error: unknown) => ctx.drain.fail(error));
    await runSqsConsumers(
      ctx,
      target,
      (message, body) => storeInInbox(ctx.pool, message, body),
      (id) => progress.acked(id),
    );
    await workers;
  },
};
