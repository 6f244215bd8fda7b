import { BrokerError } from '../../src/errors.js';
import { isReceiptHandleLost } from './aws-errors.js';
import { cappedVisibilitySeconds, changeVisibility } from './visibility.js';
import type { SQSClient } from '@aws-sdk/client-sqs';

/** What one {@link Heartbeat} needs to know. */
export interface HeartbeatOptions {
  client: SQSClient;
  queueUrl: string;
  receiptHandle: string;
  messageId: string | undefined;
  /** When the receive returned (epoch ms): the visibility clock and the 12 h window start here. */
  receivedAt: number;
  /** Seconds of visibility each beat grants from now. */
  visibilityTimeout: number;
  /** Milliseconds between beats; shorter than the visibility timeout. */
  intervalMs: number;
  /** The message is no longer ours (handle invalid, visibility lapsed, 12 h reached). Called once. */
  onLost(error: BrokerError): void;
  /** A beat failed but the visibility has not lapsed yet; the next beat tries again. */
  onError(error: BrokerError): void;
  /** The consumer's hard stop: cancels a beat in flight, which `stop()` waits for. */
  signal?: AbortSignal;
}

/**
 * Keeps one received message invisible by re-applying its visibility timeout every
 * `intervalMs` until {@link Heartbeat.stop}. A beat that finds the receipt handle
 * invalid, or that cannot land before the visibility lapses, declares the message lost.
 */
export class Heartbeat {
  private timer: NodeJS.Timeout | undefined;
  private inFlight: Promise<void> | undefined;
  private stopped = false;
  private visibleAt: number;

  constructor(private readonly options: HeartbeatOptions) {
    this.visibleAt = options.receivedAt + options.visibilityTimeout * 1000;
    this.schedule();
  }

  /** Stops beating; resolves once a beat already sent has landed (so it cannot undo a later visibility change). */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    await this.inFlight;
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.inFlight = this.beat().finally(() => {
        this.inFlight = undefined;
        this.schedule();
      });
    }, this.options.intervalMs);
  }

  private async beat(): Promise<void> {
    const { client, queueUrl, receiptHandle, receivedAt, visibilityTimeout } = this.options;
    const seconds = cappedVisibilitySeconds(visibilityTimeout, receivedAt);
    if (seconds <= 0) {
      this.lose(new Error('the 12 hour visibility limit of this receive is reached'), undefined);
      return;
    }
    const sentAt = Date.now();
    try {
      await changeVisibility(client, queueUrl, receiptHandle, seconds, this.options.signal);
      this.visibleAt = sentAt + seconds * 1000;
    } catch (cause) {
      if (this.stopped) return;
      if (isReceiptHandleLost(cause)) this.lose(cause, 'receipt handle is no longer valid');
      else if (Date.now() >= this.visibleAt)
        this.lose(cause, 'visibility lapsed before it could be extended');
      else this.options.onError(this.error(cause, true));
    }
  }

  private lose(cause: unknown, reason: string | undefined): void {
    if (this.stopped) return;
    this.stopped = true;
    this.options.onLost(this.error(cause, false, reason));
  }

  private error(cause: unknown, retryable: boolean, reason?: string): BrokerError {
    return new BrokerError('extend visibility', cause, {
      retryable,
      details: {
        queueUrl: this.options.queueUrl,
        messageIds: [this.options.messageId],
        ...(reason === undefined ? {} : { reason }),
      },
    });
  }
}
