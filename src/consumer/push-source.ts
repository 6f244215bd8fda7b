import { ShutdownError } from '../errors.js';
import type { Delivery, DeliveryOutcome, Source, SourceContext } from '../types.js';

/**
 * A {@link Source} that receives nothing itself: another library's loop (sqs-consumer's
 * poller, kafkajs's `eachMessage`) pushes deliveries into it. `run` parks until the
 * consumer stops; `push` waits for `run`.
 */
export class PushSource<T> implements Source<T> {
  private ctx: SourceContext<T> | undefined;
  private readonly ready: Promise<SourceContext<T>>;
  private markReady!: (ctx: SourceContext<T>) => void;

  constructor(readonly description: string) {
    this.ready = new Promise((resolve) => (this.markReady = resolve));
  }

  async run(ctx: SourceContext<T>): Promise<void> {
    this.ctx = ctx;
    this.markReady(ctx);
    if (ctx.signal.aborted) return;
    await new Promise<void>((resolve) =>
      ctx.signal.addEventListener('abort', () => resolve(), { once: true }),
    );
  }

  /** Hands one delivery to the runner; resolves with how it was settled. */
  async push(delivery: Delivery<T>): Promise<DeliveryOutcome> {
    const ctx = await this.ready;
    if (ctx.signal.aborted) throw new ShutdownError(delivery.key ?? '(no key)');
    return ctx.deliver(delivery);
  }

  /** Aborted once the consumer stops; undefined before it runs this source. */
  get signal(): AbortSignal | undefined {
    return this.ctx?.signal;
  }

  /** The consumer's hard stop (see `SourceContext.hardStop`); undefined before it runs this source. */
  get hardStop(): AbortSignal | undefined {
    return this.ctx?.hardStop;
  }

  async close(): Promise<void> {}
}
