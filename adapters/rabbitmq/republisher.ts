import type { ConfirmChannel, Options } from 'amqplib';
import type { AmqpConnectionLike } from './types.js';

/** Delays below this go straight back to the work queue's tail, through no delay queue. */
const IMMEDIATE_MS = 50;
/** The smallest delay step; each next one doubles it. */
const FIRST_STEP_MS = 100;

/**
 * The delay queue step for `delayMs`: the smallest of 100 ms · 2^n at or above it (a
 * retry waits at least its backoff, at most twice it), or 0 for "no wait".
 */
export function delayStep(delayMs: number): number {
  if (!(delayMs >= IMMEDIATE_MS)) return 0;
  let step = FIRST_STEP_MS;
  while (step < delayMs) step *= 2;
  return step;
}

/**
 * Publishes the source's own copies (retries into delay queues, dead letters) on one
 * confirm channel, opened on first use and again after it closed, and resolves only once
 * the broker confirmed the copy: the original is acked after that, never before, so a
 * crash in between leaves both (the claim makes the second a duplicate), never neither.
 *
 * Retries wait in delay queues, one per step of {@link delayStep}: a durable classic
 * queue whose `x-message-ttl` is the step and whose dead-letter target is the work queue
 * (default exchange, routing key = its name). One TTL per queue, not per message: RabbitMQ
 * expires messages only at a queue's head, so with per-message TTLs one long delay would
 * hold back every shorter one queued behind it.
 */
export class Republisher {
  private channel: Promise<ConfirmChannel> | undefined;
  private readonly declared = new Set<string>();

  constructor(
    private readonly connection: () => AmqpConnectionLike,
    private readonly queue: string,
    private readonly retryQueuePrefix: string,
    private readonly onError: (error: unknown) => void,
  ) {}

  /** Publishes a retry copy that reaches the work queue after about `delayMs`. */
  async retry(
    content: Buffer,
    properties: Options.Publish,
    delayMs: number,
    signal: AbortSignal,
  ): Promise<void> {
    const step = delayStep(delayMs);
    if (step === 0) return this.publish('', this.queue, content, properties, signal);
    const name = `${this.retryQueuePrefix}.${step}`;
    const channel = await this.open();
    if (!this.declared.has(name)) {
      await channel.assertQueue(name, {
        durable: true,
        arguments: {
          'x-queue-type': 'classic',
          'x-message-ttl': step,
          'x-dead-letter-exchange': '',
          'x-dead-letter-routing-key': this.queue,
        },
      });
      this.declared.add(name);
    }
    return this.publish('', name, content, properties, signal);
  }

  /** Publishes to `exchange` and waits for the broker's confirm. */
  async publish(
    exchange: string,
    routingKey: string,
    content: Buffer,
    properties: Options.Publish,
    signal: AbortSignal,
  ): Promise<void> {
    const channel = await this.open();
    signal.throwIfAborted();
    await new Promise<void>((resolve, reject) => {
      const onAbort = (): void => reject(signal.reason as Error);
      signal.addEventListener('abort', onAbort, { once: true });
      channel.publish(exchange, routingKey, content, { ...properties, persistent: true }, (err) => {
        signal.removeEventListener('abort', onAbort);
        if (err) reject(err instanceof Error ? err : new Error(String(err)));
        else resolve();
      });
    });
  }

  /** Closes the confirm channel, if one is open. */
  async close(): Promise<void> {
    const channel = this.channel;
    this.channel = undefined;
    if (channel === undefined) return;
    await channel.then((c) => c.close()).catch(() => undefined);
  }

  private open(): Promise<ConfirmChannel> {
    this.channel ??= (async () => {
      const channel = await this.connection().createConfirmChannel();
      channel.on('error', (error: unknown) => this.onError(error));
      channel.once('close', () => {
        this.channel = undefined;
        this.declared.clear();
      });
      return channel;
    })();
    this.channel.catch(() => (this.channel = undefined));
    return this.channel;
  }
}
