import type { EffectivelyOnceError } from '../../../src/errors.js';
import type { Delivery, DeliveryOutcome, Logger, SourceContext } from '../../../src/types.js';

export interface FakeContext<T> {
  ctx: SourceContext<T>;
  controller: AbortController;
  delivered: Array<Delivery<T>>;
  errors: EffectivelyOnceError[];
  warnings: string[];
  /** Deliveries handed over and not yet settled. */
  inFlight(): number;
}

/**
 * A stand-in for the runner's side of the contract: `onDeliver` decides what happens
 * to each delivery (default: ack it). Capacity is `capacity` minus unsettled deliveries.
 */
export function fakeContext<T>(
  options: {
    capacity?: number;
    onDeliver?: (delivery: Delivery<T>) => Promise<DeliveryOutcome>;
  } = {},
): FakeContext<T> {
  const controller = new AbortController();
  const delivered: Array<Delivery<T>> = [];
  const errors: EffectivelyOnceError[] = [];
  const warnings: string[] = [];
  const capacity = options.capacity ?? 10;
  const onDeliver =
    options.onDeliver ??
    (async (delivery: Delivery<T>): Promise<DeliveryOutcome> => {
      await delivery.ack();
      return 'processed';
    });
  let inFlight = 0;
  let waiters: Array<() => void> = [];
  const logger: Logger = {
    debug: () => undefined,
    info: () => undefined,
    warn: (_obj, msg) => warnings.push(msg ?? ''),
    error: (_obj, msg) => warnings.push(msg ?? ''),
  };
  const ctx: SourceContext<T> = {
    signal: controller.signal,
    hardStop: new AbortController().signal,
    logger,
    deliver: async (delivery) => {
      delivered.push(delivery);
      inFlight += 1;
      try {
        return await onDeliver(delivery);
      } finally {
        inFlight -= 1;
        const wake = waiters;
        waiters = [];
        for (const w of wake) w();
      }
    },
    freeCapacity: () => Math.max(0, capacity - inFlight),
    waitForCapacity: () =>
      new Promise<void>((resolve) => {
        if (capacity - inFlight > 0 || controller.signal.aborted) return resolve();
        waiters.push(resolve);
        controller.signal.addEventListener('abort', () => resolve(), { once: true });
      }),
    reportError: (error) => errors.push(error),
  };
  return { ctx, controller, delivered, errors, warnings, inFlight: () => inFlight };
}
