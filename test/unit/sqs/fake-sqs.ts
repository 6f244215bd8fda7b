/**
 * An in-memory SQS for unit tests of the adapter (integration tests use ElasticMQ).
 * It speaks the SDK's command objects, keeps visibility, receipt handles, receive
 * counts and FIFO group locking, records every call, and can be told to fail.
 */
import {
  ChangeMessageVisibilityCommand,
  DeleteMessageBatchCommand,
  GetQueueAttributesCommand,
  ReceiveMessageCommand,
  SendMessageCommand,
  type Message,
  type MessageAttributeValue,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import { randomUUID } from 'node:crypto';

export interface FakeMessage {
  messageId: string;
  body: string;
  attributes: Record<string, MessageAttributeValue>;
  groupId?: string;
  deduplicationId?: string;
  receiveCount: number;
  visibleAt: number;
  receivedAt: number;
  receiptHandle: string | undefined;
  deleted: boolean;
  sequence: number;
}

export interface FakeQueue {
  url: string;
  attributes: Record<string, string>;
  messages: FakeMessage[];
}

export interface Call {
  command: string;
  input: Record<string, unknown>;
}

/** A planned failure: thrown by the next `times` calls of `command`. */
interface Failure {
  command: string;
  error: () => Error;
  times: number;
}

export function awsError(name: string, message = name): Error {
  return Object.assign(new Error(message), { name, $fault: 'client' as const });
}

export const BASE = 'http://127.0.0.1:9/000000000000';

export class FakeSqs {
  readonly queues = new Map<string, FakeQueue>();
  readonly calls: Call[] = [];
  private readonly failures: Failure[] = [];
  /** Per-entry failures of DeleteMessageBatch, consumed one per matching entry. */
  readonly deleteEntryFailures: Array<{ code: string; senderFault: boolean }> = [];
  private sequence = 0;

  /** The fake as an SQSClient: only `send` exists. */
  readonly client = {
    send: (command: unknown, options?: { abortSignal?: AbortSignal }) =>
      this.send(command, options),
  } as unknown as SQSClient;

  createQueue(name: string, attributes: Record<string, string> = {}): string {
    const url = `${BASE}/${name}`;
    this.queues.set(url, {
      url,
      attributes: { VisibilityTimeout: '30', ...attributes },
      messages: [],
    });
    return url;
  }

  sendMessage(
    url: string,
    body: string,
    options: {
      attributes?: Record<string, string>;
      groupId?: string;
      deduplicationId?: string;
    } = {},
  ): FakeMessage {
    const message: FakeMessage = {
      messageId: randomUUID(),
      body,
      attributes: Object.fromEntries(
        Object.entries(options.attributes ?? {}).map(([k, v]) => [
          k,
          { DataType: 'String', StringValue: v },
        ]),
      ),
      groupId: options.groupId,
      deduplicationId: options.deduplicationId,
      receiveCount: 0,
      visibleAt: 0,
      receivedAt: 0,
      receiptHandle: undefined,
      deleted: false,
      sequence: this.sequence++,
    };
    this.queue(url).messages.push(message);
    return message;
  }

  queue(url: string): FakeQueue {
    const queue = this.queues.get(url);
    if (!queue) throw awsError('QueueDoesNotExist', 'The specified queue does not exist.');
    return queue;
  }

  /** Messages not deleted. */
  remaining(url: string): FakeMessage[] {
    return this.queue(url).messages.filter((m) => !m.deleted);
  }

  fail(command: string, error: () => Error, times = 1): void {
    this.failures.push({ command, error, times });
  }

  callsOf(command: string): Call[] {
    return this.calls.filter((c) => c.command === command);
  }

  private async send(
    command: unknown,
    options: { abortSignal?: AbortSignal } = {},
  ): Promise<unknown> {
    const name = (command as { constructor: { name: string } }).constructor.name;
    const input = (command as { input: Record<string, unknown> }).input;
    this.calls.push({ command: name, input });
    await Promise.resolve();
    const failure = this.failures.find((f) => f.command === name && f.times > 0);
    if (failure) {
      failure.times -= 1;
      throw failure.error();
    }
    if (command instanceof ReceiveMessageCommand)
      return this.receive(command.input, options.abortSignal);
    if (command instanceof DeleteMessageBatchCommand) return this.deleteBatch(command.input);
    if (command instanceof ChangeMessageVisibilityCommand)
      return this.changeVisibility(command.input);
    if (command instanceof GetQueueAttributesCommand)
      return { Attributes: { ...this.queue(command.input.QueueUrl!).attributes } };
    if (command instanceof SendMessageCommand) {
      const m = this.sendMessage(command.input.QueueUrl!, command.input.MessageBody!, {
        groupId: command.input.MessageGroupId,
        deduplicationId: command.input.MessageDeduplicationId,
      });
      m.attributes = command.input.MessageAttributes ?? {};
      return { MessageId: m.messageId };
    }
    throw new Error(`FakeSqs: unsupported command ${name}`);
  }

  private async receive(
    input: ReceiveMessageCommand['input'],
    signal?: AbortSignal,
  ): Promise<{ Messages?: Message[] }> {
    const queue = this.queue(input.QueueUrl!);
    const deadline = Date.now() + (input.WaitTimeSeconds ?? 0) * 1000;
    for (;;) {
      if (signal?.aborted)
        throw Object.assign(new Error('Request aborted'), { name: 'AbortError' });
      const picked = this.pick(queue, input.MaxNumberOfMessages ?? 1);
      if (picked.length > 0 || Date.now() >= deadline) {
        const visibility = input.VisibilityTimeout ?? Number(queue.attributes.VisibilityTimeout);
        return { Messages: picked.map((m) => this.deliver(m, visibility)) };
      }
      await new Promise((r) => setTimeout(r, 5));
    }
  }

  private pick(queue: FakeQueue, max: number): FakeMessage[] {
    const now = Date.now();
    const blockedGroups = new Set(
      queue.messages
        .filter((m) => !m.deleted && m.visibleAt > now && m.groupId !== undefined)
        .map((m) => m.groupId),
    );
    const picked: FakeMessage[] = [];
    for (const m of queue.messages) {
      if (picked.length >= max) break;
      if (m.deleted || m.visibleAt > now) continue;
      if (
        m.groupId !== undefined &&
        blockedGroups.has(m.groupId) &&
        !picked.some((p) => p.groupId === m.groupId)
      )
        continue;
      picked.push(m);
    }
    return picked;
  }

  private deliver(m: FakeMessage, visibility: number): Message {
    m.receiveCount += 1;
    m.receivedAt = Date.now();
    m.visibleAt = m.receivedAt + visibility * 1000;
    m.receiptHandle = `${m.messageId}#${randomUUID()}`;
    const attributes: Record<string, string> = {
      ApproximateReceiveCount: String(m.receiveCount),
      SentTimestamp: '1',
    };
    if (m.groupId !== undefined) attributes.MessageGroupId = m.groupId;
    if (m.deduplicationId !== undefined) attributes.MessageDeduplicationId = m.deduplicationId;
    return {
      MessageId: m.messageId,
      ReceiptHandle: m.receiptHandle,
      Body: m.body,
      Attributes: attributes,
      MessageAttributes: m.attributes,
    };
  }

  private byHandle(url: string, handle: string | undefined): FakeMessage | undefined {
    return this.queue(url).messages.find(
      (m) => !m.deleted && m.receiptHandle === handle && m.visibleAt > Date.now(),
    );
  }

  private deleteBatch(input: DeleteMessageBatchCommand['input']): unknown {
    const Successful: Array<{ Id: string }> = [];
    const Failed: Array<{ Id: string; Code: string; SenderFault: boolean; Message: string }> = [];
    for (const entry of input.Entries ?? []) {
      const planned = this.deleteEntryFailures.shift();
      if (planned) {
        Failed.push({
          Id: entry.Id!,
          Code: planned.code,
          SenderFault: planned.senderFault,
          Message: planned.code,
        });
        continue;
      }
      const m = this.queue(input.QueueUrl!).messages.find(
        (x) => x.receiptHandle === entry.ReceiptHandle && !x.deleted,
      );
      if (!m) {
        Failed.push({
          Id: entry.Id!,
          Code: 'ReceiptHandleIsInvalid',
          SenderFault: true,
          Message: 'invalid',
        });
        continue;
      }
      m.deleted = true;
      Successful.push({ Id: entry.Id! });
    }
    return { Successful, Failed };
  }

  private changeVisibility(input: ChangeMessageVisibilityCommand['input']): unknown {
    const m = this.byHandle(input.QueueUrl!, input.ReceiptHandle);
    if (!m) throw awsError('ReceiptHandleIsInvalid');
    if (input.VisibilityTimeout! > 43_200) throw awsError('InvalidParameterValue');
    m.visibleAt = Date.now() + input.VisibilityTimeout! * 1000;
    return {};
  }
}
