import { describe, expect, it } from '@jest/globals';
import { deadlinePassed, workTimeoutMs } from '../../../src/consumer/work-deadline.js';
import type { Delivery } from '../../../src/types.js';

const delivery = (workDeadline?: number): Delivery<unknown> =>
  ({ workDeadline }) as unknown as Delivery<unknown>;

describe('workTimeoutMs', () => {
  it('keeps handlerTimeoutMs when no delivery has a deadline', () => {
    expect(workTimeoutMs(60_000, [delivery(), delivery()], 1_000)).toBe(60_000);
  });

  it('shortens the timeout to the earliest deadline of the deliveries', () => {
    expect(workTimeoutMs(60_000, [delivery(5_000), delivery(3_000)], 1_000)).toBe(2_000);
    expect(workTimeoutMs(500, [delivery(5_000)], 1_000)).toBe(500);
  });

  it('bounds a handler without a timeout (0) by the deadline alone', () => {
    expect(workTimeoutMs(0, [delivery(1_250)], 1_000)).toBe(250);
  });

  it("says 'passed' once the deadline has come", () => {
    expect(workTimeoutMs(60_000, [delivery(1_000)], 1_000)).toBe('passed');
    expect(workTimeoutMs(0, [delivery(900)], 1_000)).toBe('passed');
  });
});

describe('deadlinePassed', () => {
  it('is false without a deadline and before it, true from it on', () => {
    expect(deadlinePassed(delivery(), 5)).toBe(false);
    expect(deadlinePassed(delivery(10), 9)).toBe(false);
    expect(deadlinePassed(delivery(10), 10)).toBe(true);
  });
});
