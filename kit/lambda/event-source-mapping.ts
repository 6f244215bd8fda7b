import {
  DeleteMessageBatchCommand,
  type Message,
  ReceiveMessageCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import type { SQSBatchItemFailure, SQSEvent } from 'aws-lambda';
import type { Invoker } from './invoker.js';
import { lambdaRecord, queueArnOf } from './records.js';

/** An event source mapping's settings, named as Lambda names them. */
export interface EventSourceMappingOptions {
  readonly client: SQSClient;
  readonly queueUrl: string;
  readonly invoker: Invoker;
  /** `BatchSize`: records per invocation at most. Default 10. */
  readonly batchSize?: number;
  /**
   * `MaximumBatchingWindowInSeconds`, in ms: how long to keep gathering records after the
   * first before invoking with fewer than `batchSize`. Default 0: one receive per batch.
   */
  readonly batchingWindowMs?: number;
  /** The function's timeout. Default 3 000 ms (Lambda's default). */
  readonly functionTimeoutMs?: number;
  /** `FunctionResponseTypes: ['ReportBatchItemFailures']`. Default true. */
  readonly reportBatchItemFailures?: boolean;
  /** Pollers invoking at once (Lambda scales these with the queue). Default 1. */
  readonly concurrency?: number;
}

/** What the mapping did, for the tests to assert on. */
export interface MappingStats {
  invocations: number;
  /** Invocations that threw, timed out or lost their environment: nothing deleted. */
  failedInvocations: number;
  /** Records deleted after an answer. */
  deleted: number;
  /** Records the function answered in `batchItemFailures`. */
  reportedFailures: number;
  /** Answers Lambda would refuse (an identifier not in the batch): the whole batch failed. */
  invalidAnswers: number;
}

/**
 * Lambda's SQS event source mapping, played against a real queue (ElasticMQ), as AWS
 * documents it: long-polls with ReceiveMessage (all attributes), gathers up to `batchSize`
 * records within the batching window, invokes the function synchronously with them in
 * the queue's order (a FIFO queue's groups in order), then deletes every record the
 * answer does not list in `batchItemFailures` (all of them on an empty or absent list). A
 * failed invocation deletes nothing, and so does an answer naming a record not in the
 * batch. What is not deleted comes back after the queue's visibility timeout.
 */
export class EventSourceMapping {
  readonly stats: MappingStats = {
    invocations: 0,
    failedInvocations: 0,
    deleted: 0,
    reportedFailures: 0,
    invalidAnswers: 0,
  };
  private readonly abort = new AbortController();
  private loops: Array<Promise<void>> = [];
  private readonly queueArn: string;

  constructor(private readonly options: EventSourceMappingOptions) {
    this.queueArn = queueArnOf(options.queueUrl);
  }

  start(): void {
    const n = this.options.concurrency ?? 1;
    for (let i = 0; i < n; i++) this.loops.push(this.poll());
  }

  /** Stops polling and waits for the invocations in flight to be answered and settled. */
  async stop(): Promise<void> {
    this.abort.abort();
    await Promise.all(this.loops);
    this.loops = [];
  }

  private async poll(): Promise<void> {
    while (!this.abort.signal.aborted) {
      let batch: Message[];
      try {
        batch = await this.gather();
      } catch (error) {
        if (this.abort.signal.aborted) return;
        // The emulator restarting, a dropped connection: Lambda's poller retries too.
        await new Promise((resolve) => setTimeout(resolve, 200));
        void error;
        continue;
      }
      if (batch.length > 0) await this.invoke(batch);
    }
  }

  /** One batch: up to `batchSize` records, within the batching window after the first. */
  private async gather(): Promise<Message[]> {
    const batchSize = this.options.batchSize ?? 10;
    const windowMs = this.options.batchingWindowMs ?? 0;
    const batch: Message[] = [];
    let until = Number.POSITIVE_INFINITY;
    while (batch.length < batchSize && !this.abort.signal.aborted) {
      const left = until - Date.now();
      if (batch.length > 0 && left <= 0) break;
      const out = await this.options.client.send(
        new ReceiveMessageCommand({
          QueueUrl: this.options.queueUrl,
          MaxNumberOfMessages: Math.min(10, batchSize - batch.length),
          // Long polls while empty; within the window, waits at most what is left of it.
          WaitTimeSeconds: batch.length === 0 ? 1 : Math.min(1, Math.floor(left / 1000)),
          MessageSystemAttributeNames: ['All'],
          MessageAttributeNames: ['All'],
        }),
        { abortSignal: this.abort.signal },
      );
      const received = out.Messages ?? [];
      if (batch.length === 0 && received.length > 0) until = Date.now() + windowMs;
      batch.push(...received);
      if (batch.length === 0) return batch;
      if (windowMs === 0) break;
    }
    return batch;
  }

  private async invoke(batch: Message[]): Promise<void> {
    const event: SQSEvent = { Records: batch.map((m) => lambdaRecord(m, this.queueArn)) };
    this.stats.invocations++;
    const timeoutMs = this.options.functionTimeoutMs ?? 3_000;
    const invocation = await this.options.invoker.invoke(event, timeoutMs);
    if (invocation.kind === 'failed') {
      this.stats.failedInvocations++;
      return;
    }
    const failed = this.failures(invocation.response, batch);
    if (failed === 'invalid') {
      this.stats.invalidAnswers++;
      return;
    }
    this.stats.reportedFailures += failed.size;
    const done = batch.filter((m) => !failed.has(m.MessageId!));
    await this.delete(done);
  }

  /** The answer's failed message ids; 'invalid' when Lambda would fail the whole batch. */
  private failures(response: unknown, batch: Message[]): Set<string> | 'invalid' {
    if (this.options.reportBatchItemFailures === false) return new Set();
    if (response === null || response === undefined) return new Set();
    if (typeof response !== 'object') return 'invalid';
    const items = (response as { batchItemFailures?: unknown }).batchItemFailures;
    if (items === null || items === undefined) return new Set();
    if (!Array.isArray(items)) return 'invalid';
    const ids = new Set(batch.map((m) => m.MessageId!));
    const failed = new Set<string>();
    for (const item of items as SQSBatchItemFailure[]) {
      const id = item?.itemIdentifier;
      if (typeof id !== 'string' || !ids.has(id)) return 'invalid';
      failed.add(id);
    }
    return failed;
  }

  private async delete(messages: Message[]): Promise<void> {
    for (let i = 0; i < messages.length; i += 10) {
      const chunk = messages.slice(i, i + 10);
      try {
        const out = await this.options.client.send(
          new DeleteMessageBatchCommand({
            QueueUrl: this.options.queueUrl,
            Entries: chunk.map((m, j) => ({ Id: String(j), ReceiptHandle: m.ReceiptHandle! })),
          }),
        );
        this.stats.deleted += out.Successful?.length ?? 0;
      } catch {
        // Not deleted: the records come back after the visibility timeout, as duplicates.
      }
    }
  }
}
