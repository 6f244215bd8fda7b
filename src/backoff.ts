import { ConfigurationError } from './errors.js';
import type { Backoff } from './types.js';

/** Resolved backoff: delay in ms before the retry that follows failed attempt `attempt`. */
export type BackoffFn = (attempt: number) => number;

/**
 * Exponential backoff with full jitter: spreading retries randomly over the whole
 * window keeps a burst of failures from retrying in lock step.
 */
export function resolveBackoff(backoff: Backoff | undefined): BackoffFn {
  if (typeof backoff === 'function') return (attempt) => Math.max(0, backoff(attempt));
  const initialMs = backoff?.initialMs ?? 1000;
  const maxMs = backoff?.maxMs ?? 300_000;
  const factor = backoff?.factor ?? 2;
  const jitter = backoff?.jitter ?? true;
  if (!(initialMs >= 0))
    throw new ConfigurationError('backoff.initialMs', 'must be >= 0', { initialMs });
  if (!(maxMs >= initialMs))
    throw new ConfigurationError('backoff.maxMs', 'must be >= backoff.initialMs', { maxMs });
  if (!(factor >= 1)) throw new ConfigurationError('backoff.factor', 'must be >= 1', { factor });
  return (attempt) => {
    const ceiling = Math.min(maxMs, initialMs * factor ** Math.max(0, attempt - 1));
    return Math.round(jitter ? Math.random() * ceiling : ceiling);
  };
}

/**
 * The delay before retry number `failures` (1 = after the first failure) of a loop
 * that probes something recovering (a database, a queue): exponential, with "equal
 * jitter" (half the step fixed, half random), so a fleet of workers that failed
 * together does not knock in lockstep, yet none probes much sooner than the step.
 */
export function retryDelay(failures: number, bounds: { initialMs: number; maxMs: number }): number {
  const ceiling = Math.min(bounds.maxMs, bounds.initialMs * 2 ** Math.max(0, failures - 1));
  return Math.round(ceiling / 2 + (Math.random() * ceiling) / 2);
}

/** Delay before running a transaction again after a serialization failure or deadlock. */
export const conflictDelay = resolveBackoff({ initialMs: 10, maxMs: 1000 });
