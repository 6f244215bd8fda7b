import type { Delivery, DeliveryOutcome, Source } from 'effectively-once';

/** What the bench wants to see of a consumer's deliveries. */
export interface SourceObserver<T> {
  /** A delivery reaches the runner (the drain clock starts at the first one). */
  onDeliver(delivery: Delivery<T>): void;
  /** It settled: `ctx.deliver` resolves after COMMIT and the broker ack, so this is "done". */
  onSettled(delivery: Delivery<T>, outcome: DeliveryOutcome): void;
}

/** Wraps a Source so the bench sees each delivery start and settle; adds no broker or DB work. */
export function observedSource<T>(source: Source<T>, observer: SourceObserver<T>): Source<T> {
  return {
    description: `observed(${source.description})`,
    run: (ctx) =>
      source.run({
        signal: ctx.signal,
        hardStop: ctx.hardStop,
        logger: ctx.logger,
        freeCapacity: () => ctx.freeCapacity(),
        waitForCapacity: () => ctx.waitForCapacity(),
        reportError: (error) => ctx.reportError(error),
        deliver: async (delivery) => {
          observer.onDeliver(delivery);
          const outcome = await ctx.deliver(delivery);
          observer.onSettled(delivery, outcome);
          return outcome;
        },
      }),
    close: () => source.close(),
  };
}
