import { ConfigurationError } from '../errors.js';

const UNIT_MS = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 } as const;

/**
 * A duration written as a whole number and one unit: `90s`, `15m`, `12h`, `7d`, `2w`
 * (`m` is minutes). Strict on purpose: a window decides which keys are forgotten, so
 * `7` (days? seconds?), `1.5d`, `7D` or `1d12h` are refused rather than guessed.
 */
export function parseDuration(text: string, option: string): number {
  const match = /^([0-9]+)([smhdw])$/.exec(text);
  if (match === null) {
    throw new ConfigurationError(
      option,
      `"${text}" is not a duration: write a whole number and one unit, s, m (minutes), h, d or w, e.g. 90s, 15m, 7d, 2w`,
    );
  }
  const count = Number(match[1]);
  const ms = count * UNIT_MS[match[2] as keyof typeof UNIT_MS];
  if (count === 0) throw new ConfigurationError(option, `"${text}" must be longer than zero`);
  if (!Number.isSafeInteger(ms)) throw new ConfigurationError(option, `"${text}" is too long`);
  return ms;
}
