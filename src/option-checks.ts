import { ConfigurationError } from './errors.js';

/** `value` (or `fallback` when absent) as an integer in [min, max]; otherwise a ConfigurationError naming `option`. */
export function intOption(
  option: string,
  value: number | undefined,
  fallback: number,
  min: number,
  max: number,
): number {
  const v = value ?? fallback;
  if (!Number.isInteger(v) || v < min || v > max) {
    throw new ConfigurationError(option, `must be an integer from ${min} to ${max}`, { value });
  }
  return v;
}

/** `value` (or `fallback` when absent) as a number above 0 and at most 1 (a share of time). */
export function fractionOption(
  option: string,
  value: number | undefined,
  fallback: number,
): number {
  const v = value ?? fallback;
  if (typeof v !== 'number' || !(v > 0 && v <= 1)) {
    throw new ConfigurationError(option, 'must be a number above 0 and at most 1', { value });
  }
  return v;
}

/**
 * Refuses options that pre-release builds spelled differently (`renamed`: old name → what
 * to write now). Ignored, such an option would change what the door does without a word:
 * a dropped key option makes every resend a new key, applied again.
 */
export function refuseRenamed(options: object, renamed: Readonly<Record<string, string>>): void {
  for (const [old, now] of Object.entries(renamed)) {
    if ((options as Record<string, unknown>)[old] !== undefined)
      throw new ConfigurationError(old, `is not an option: ${now}`);
  }
}
