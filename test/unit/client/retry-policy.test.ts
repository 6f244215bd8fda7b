import { describe, expect, it } from '@jest/globals';
import {
  decorrelatedJitter,
  isReplayed,
  isRetryableStatus,
  nextStep,
  parseRetryAfter,
} from '../../../src/client/retry-policy.js';

const bounds = { initialMs: 100, maxMs: 10_000 };

describe('isRetryableStatus', () => {
  it.each([408, 409, 429, 500, 502, 503, 504, 599])('%i is retried', (status) => {
    expect(isRetryableStatus(status)).toBe(true);
  });
  it.each([200, 201, 204, 301, 304, 400, 401, 403, 404, 410, 412, 413, 422, 428, 600])(
    '%i is final',
    (status) => {
      expect(isRetryableStatus(status)).toBe(false);
    },
  );
});

describe('parseRetryAfter', () => {
  const now = Date.UTC(2025, 0, 1, 12, 0, 0);

  it.each([
    ['0', 0],
    ['1', 1000],
    [' 120 ', 120_000],
    ['86400', 86_400_000],
  ])('delay-seconds %j → %i ms', (value, ms) => {
    expect(parseRetryAfter(value, now)).toBe(ms);
  });

  it('an HTTP-date in the future: the time until it', () => {
    expect(parseRetryAfter('Wed, 01 Jan 2025 12:00:30 GMT', now)).toBe(30_000);
  });

  it('an HTTP-date in the past means now', () => {
    expect(parseRetryAfter('Wed, 01 Jan 2025 11:00:00 GMT', now)).toBe(0);
  });

  it.each([null, '', '-1', '1.5', '+3', 'soon', '3 seconds', 'Wed, 99 Foo 2025'])(
    'absent or malformed %j → undefined (the backoff decides)',
    (value) => {
      expect(parseRetryAfter(value, now)).toBeUndefined();
    },
  );
});

describe('decorrelatedJitter', () => {
  it('draws between the base and three times the previous wait', () => {
    expect(decorrelatedJitter(1000, bounds, () => 0)).toBe(100);
    expect(decorrelatedJitter(1000, bounds, () => 0.5)).toBe(1550);
    expect(decorrelatedJitter(1000, bounds, () => 0.999_999)).toBe(3000);
  });

  it('never exceeds the cap', () => {
    expect(decorrelatedJitter(9000, bounds, () => 0.99)).toBe(10_000);
  });

  it('from the first wait (previous = base) it stays within [base, 3 × base]', () => {
    for (let i = 0; i < 1000; i++) {
      const d = decorrelatedJitter(100, bounds);
      expect(d).toBeGreaterThanOrEqual(100);
      expect(d).toBeLessThanOrEqual(300);
    }
  });

  it('a run of waits grows from the previous one, not from the attempt number', () => {
    let previous = bounds.initialMs;
    const waits: number[] = [];
    for (let i = 0; i < 8; i++) {
      previous = decorrelatedJitter(previous, bounds, () => 1);
      waits.push(previous);
    }
    expect(waits).toEqual([300, 900, 2700, 8100, 10_000, 10_000, 10_000, 10_000]);
  });
});

describe('nextStep', () => {
  const base = {
    attempt: 1,
    maxAttempts: 5,
    remainingMs: 60_000,
    retryAfterMs: undefined,
    previousDelayMs: 100,
    backoff: bounds,
    random: () => 0,
  };

  it('retries with the backoff when the server gave no Retry-After', () => {
    expect(nextStep(base)).toEqual({ retry: true, delayMs: 100, fromRetryAfter: false });
  });

  it('a Retry-After wins over the backoff, even past the cap', () => {
    expect(nextStep({ ...base, retryAfterMs: 30_000 })).toEqual({
      retry: true,
      delayMs: 30_000,
      fromRetryAfter: true,
    });
  });

  it('stops after the last attempt', () => {
    expect(nextStep({ ...base, attempt: 5 })).toEqual({ retry: false, reason: 'attempts' });
  });

  it('stops now when the wait would reach the deadline, instead of sleeping into it', () => {
    expect(nextStep({ ...base, retryAfterMs: 5000, remainingMs: 5000 })).toEqual({
      retry: false,
      reason: 'deadline',
    });
    expect(nextStep({ ...base, remainingMs: 50 })).toEqual({ retry: false, reason: 'deadline' });
  });
});

describe('isReplayed', () => {
  it.each([
    ['true', true],
    ['True', true],
    ['?1', true],
    ['false', false],
    ['?0', false],
  ])('Idempotent-Replayed: %s → %s', (value, replayed) => {
    expect(isReplayed(new Headers({ 'Idempotent-Replayed': value }))).toBe(replayed);
  });

  it('no header: not a replay', () => {
    expect(isReplayed(new Headers())).toBe(false);
  });
});
