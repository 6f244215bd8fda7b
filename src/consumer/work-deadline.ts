import { timeoutUntil } from '../deadline.js';
import type { Delivery } from '../types.js';

/**
 * The handler's timeout for work that must end by the earliest `workDeadline` of
 * `deliveries` (see {@link Delivery.workDeadline}): `configured` (the consumer's
 * `handlerTimeoutMs`, 0 for none) or less; `'passed'` when that deadline has come.
 */
export function workTimeoutMs(
  configured: number,
  deliveries: ReadonlyArray<Delivery<unknown>>,
  now: number = Date.now(),
): number | 'passed' {
  return timeoutUntil(configured, earliestDeadline(deliveries), now);
}

/** Whether the delivery's `workDeadline` has come: it must not be started. */
export function deadlinePassed(delivery: Delivery<unknown>, now: number = Date.now()): boolean {
  return delivery.workDeadline !== undefined && now >= delivery.workDeadline;
}

function earliestDeadline(deliveries: ReadonlyArray<Delivery<unknown>>): number | undefined {
  let earliest: number | undefined;
  for (const d of deliveries) {
    if (d.workDeadline !== undefined && (earliest === undefined || d.workDeadline < earliest))
      earliest = d.workDeadline;
  }
  return earliest;
}
