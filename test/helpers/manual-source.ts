import type { EffectivelyOnceError } from '../../src/errors.js';
import type { Delivery, DeliveryOutcome, Source, SourceContext } from '../../src/types.js';

/** What the runner did with one hand-made delivery. */
export interface HandDelivery<T> {
  readonly delivery: Delivery<T>;
  /** `ack`, `retry`, `deadLetter`, `release`, in the order the runner called them. */
  readonly calls: string[];
  deadLetterReason?: EffectivelyOnceError;
  retryReason?: EffectivelyOnceError;
}

/**
 * A {@link Source} the test drives by hand: `push` hands the runner a delivery built
 * from the given fields (anything a real adapter could produce, e.g. an aborted
 * `signal` or a body no JSON can hold) and records which settle calls it got.
 * `events` logs `run-start`, `run-end` and `close` in order.
 */
export class ManualSource<T> implements Source<T> {
  readonly description = 'manual';
  readonly events: string[] = [];
  private ctx: SourceContext<T> | undefined;
  private readonly ready: Promise<SourceContext<T>>;
  private markReady!: (ctx: SourceContext<T>) => void;

  constructor() {
    this.ready = new Promise((resolve) => (this.markReady = resolve));
  }

  async run(ctx: SourceContext<T>): Promise<void> {
    this.events.push('run-start');
    this.ctx = ctx;
    this.markReady(ctx);
    if (!ctx.signal.aborted) {
      await new Promise<void>((resolve) =>
        ctx.signal.addEventListener('abort', () => resolve(), { once: true }),
      );
    }
    this.events.push('run-end');
  }

  async close(): Promise<void> {
    this.events.push('close');
  }

  /** Whether `run` has been called. */
  get started(): boolean {
    return this.ctx !== undefined;
  }

  /** Delivers one message; resolves with its record and the runner's outcome. */
  async push(
    fields: Pick<Delivery<T>, 'key' | 'body'> &
      Partial<Omit<Delivery<T>, 'ack' | 'retry' | 'deadLetter' | 'release'>>,
  ): Promise<HandDelivery<T> & { outcome: DeliveryOutcome }> {
    const ctx = await this.ready;
    const calls: string[] = [];
    const record: HandDelivery<T> = {
      calls,
      delivery: {
        payload: undefined,
        raw: undefined,
        attempt: 1,
        ...fields,
        ack: async () => void calls.push('ack'),
        retry: async (_delayMs, reason) => {
          calls.push('retry');
          record.retryReason = reason;
        },
        deadLetter: async (reason) => {
          calls.push('deadLetter');
          record.deadLetterReason = reason;
        },
        release: async () => void calls.push('release'),
      },
    };
    const outcome = await ctx.deliver(record.delivery);
    return { ...record, outcome };
  }
}

/** Every `code` along an error's `cause` chain, outermost first. */
export function codesOf(error: unknown): string[] {
  const codes: string[] = [];
  for (let e = error, depth = 0; e !== undefined && e !== null && depth < 10; depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string') codes.push(code);
    e = (e as { cause?: unknown }).cause;
  }
  return codes;
}
