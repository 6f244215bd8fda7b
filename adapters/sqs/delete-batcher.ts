import { DeleteMessageBatchCommand, type SQSClient } from '@aws-sdk/client-sqs';
import { retryDelay } from '../../src/backoff.js';
import { BrokerError } from '../../src/errors.js';
import { isReceiptHandleLost } from './aws-errors.js';
import { SQS_LIMITS } from './limits.js';

/** Options of {@link DeleteBatcher}. */
export interface DeleteBatcherOptions {
  /** How long a lone delete waits for company before its batch is sent. */
  delayMs: number;
  /** Sends of one entry before its promise rejects. */
  attempts: number;
  /** Called for each failed send that will be retried (the final failure rejects instead). */
  onRetry?: (error: BrokerError) => void;
  /** Pause before re-sending failed entries; grows linearly with the attempt. Default 100 ms. */
  retryDelayMs?: number;
}

interface Entry {
  readonly id: string;
  readonly receiptHandle: string;
  readonly messageId: string | undefined;
  attempts: number;
  resolve(): void;
  reject(error: BrokerError): void;
}

/**
 * Groups deletes into `DeleteMessageBatch` requests: a batch leaves when it holds 10
 * entries or `delayMs` after its first entry. Entries that fail (the whole request or
 * one entry) are re-sent up to `attempts` times; a receipt handle SQS calls invalid is
 * final at once (the message was received again elsewhere, or is already gone).
 */
export class DeleteBatcher {
  private queue: Entry[] = [];
  private timer: NodeJS.Timeout | undefined;
  private readonly outstanding = new Set<Promise<void>>();
  private nextId = 0;
  private signal: AbortSignal | undefined;
  /** Entries waiting out their retry delay, by timer: the hard stop rejects them at once. */
  private readonly retrying = new Map<NodeJS.Timeout, Entry[]>();

  constructor(
    private readonly client: SQSClient,
    private readonly queueUrl: string,
    private readonly options: DeleteBatcherOptions,
  ) {}

  /**
   * From `signal`'s abort (the consumer's hard stop) on, sends nothing more: requests in
   * flight are cancelled and every delete not yet confirmed rejects (its message is
   * received again; its key committed, so it is a duplicate). A client without a request
   * timeout would otherwise wait without end for an endpoint that never answers.
   */
  cancelOn(signal: AbortSignal): void {
    this.signal = signal;
    const abandon = (): void => {
      if (this.timer !== undefined) clearTimeout(this.timer);
      this.timer = undefined;
      const waiting = [...this.retrying.values()].flat();
      for (const timer of this.retrying.keys()) clearTimeout(timer);
      this.retrying.clear();
      const queued = [...this.queue.splice(0), ...waiting];
      if (queued.length > 0) this.fail(queued, signal.reason, undefined);
    };
    if (signal.aborted) abandon();
    else signal.addEventListener('abort', abandon, { once: true });
  }

  /** Deletes one received message; resolves once SQS confirmed it. */
  delete(receiptHandle: string, messageId: string | undefined): Promise<void> {
    const done = new Promise<void>((resolve, reject) => {
      this.enqueue({
        id: `m${this.nextId++}`,
        receiptHandle,
        messageId,
        attempts: 0,
        resolve,
        reject,
      });
    });
    const tracked = done.catch(() => undefined);
    this.outstanding.add(tracked);
    void tracked.finally(() => this.outstanding.delete(tracked));
    return done;
  }

  /** Sends everything queued now and resolves when every delete so far has settled. */
  async flush(): Promise<void> {
    while (this.outstanding.size > 0) {
      this.sendQueued();
      await Promise.all([...this.outstanding]);
    }
  }

  private enqueue(entry: Entry): void {
    if (this.signal?.aborted === true) {
      this.fail([entry], this.signal.reason, undefined);
      return;
    }
    this.queue.push(entry);
    if (this.queue.length >= SQS_LIMITS.maxBatchSize) {
      this.sendQueued();
    } else if (this.timer === undefined) {
      this.timer = setTimeout(() => this.sendQueued(), this.options.delayMs);
    }
  }

  private sendQueued(): void {
    if (this.timer !== undefined) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
    while (this.queue.length > 0) {
      const batch = this.queue.splice(0, SQS_LIMITS.maxBatchSize);
      void this.send(batch);
    }
  }

  private async send(batch: Entry[]): Promise<void> {
    for (const entry of batch) entry.attempts += 1;
    let output;
    try {
      output = await this.client.send(
        new DeleteMessageBatchCommand({
          QueueUrl: this.queueUrl,
          Entries: batch.map(({ id, receiptHandle }) => ({ Id: id, ReceiptHandle: receiptHandle })),
        }),
        { abortSignal: this.signal },
      );
    } catch (cause) {
      this.fail(batch, cause, undefined);
      return;
    }
    const byId = new Map(batch.map((entry) => [entry.id, entry]));
    for (const success of output.Successful ?? []) {
      const entry = success.Id === undefined ? undefined : byId.get(success.Id);
      entry?.resolve();
      if (success.Id !== undefined) byId.delete(success.Id);
    }
    const failedByCode = new Map<
      string,
      { entries: Entry[]; message: string | undefined; senderFault: boolean }
    >();
    for (const failure of output.Failed ?? []) {
      const entry = failure.Id === undefined ? undefined : byId.get(failure.Id);
      if (entry === undefined) continue;
      byId.delete(entry.id);
      const code = failure.Code ?? 'Unknown';
      const group = failedByCode.get(code) ?? {
        entries: [],
        message: failure.Message,
        senderFault: failure.SenderFault === true,
      };
      group.entries.push(entry);
      failedByCode.set(code, group);
    }
    for (const [code, group] of failedByCode) {
      const cause = Object.assign(new Error(`${code}: ${group.message ?? 'delete failed'}`), {
        name: code,
      });
      this.fail(group.entries, cause, code);
    }
    // Entries SQS mentioned in neither list: treat as a transient failure.
    if (byId.size > 0)
      this.fail(
        [...byId.values()],
        new Error('entry missing from DeleteMessageBatch result'),
        undefined,
      );
  }

  private fail(entries: Entry[], cause: unknown, code: string | undefined): void {
    // Past the hard stop nothing is sent again: the failure is final.
    const permanent =
      (code !== undefined && isReceiptHandleLost(code)) || this.signal?.aborted === true;
    const retry = permanent
      ? []
      : entries.filter((entry) => entry.attempts < this.options.attempts);
    const final = entries.filter((entry) => !retry.includes(entry));
    if (final.length > 0) {
      const error = this.error(final, cause, code, false);
      for (const entry of final) entry.reject(error);
    }
    if (retry.length === 0) return;
    this.options.onRetry?.(this.error(retry, cause, code, true));
    const attempt = Math.max(...retry.map((entry) => entry.attempts));
    const initialMs = this.options.retryDelayMs ?? 100;
    const timer = setTimeout(
      () => {
        this.retrying.delete(timer);
        for (const entry of retry) this.enqueue(entry);
      },
      retryDelay(attempt, { initialMs, maxMs: initialMs * 2 ** (this.options.attempts - 1) }),
    );
    this.retrying.set(timer, retry);
  }

  private error(
    entries: Entry[],
    cause: unknown,
    code: string | undefined,
    willRetry: boolean,
  ): BrokerError {
    return new BrokerError('delete', cause, {
      retryable: willRetry,
      details: {
        queueUrl: this.queueUrl,
        messageIds: entries.map((entry) => entry.messageId),
        attempts: Math.max(...entries.map((entry) => entry.attempts)),
        ...(code === undefined ? {} : { awsCode: code }),
        willRetry,
      },
    });
  }
}
