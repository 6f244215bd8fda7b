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
