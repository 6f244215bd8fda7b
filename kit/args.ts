/**
 * The one way chaos, bench and compare read their command line: node:util's parseArgs
 * for the shape, these checks for the values, and {@link runCli} for what a bad command
 * line does (the message and the usage on stderr, exit 64; `--help`: the usage, exit 0).
 */

/** A command line that does not say a valid run; an empty message means `--help`. */
export class UsageError extends Error {}

/** `--name`'s value as an integer in [min, max], `fallback` when absent; UsageError otherwise. */
export function intOption(
  name: string,
  raw: string | undefined,
  fallback: number,
  min: number,
  max: number,
): number {
  return rangeOption('an integer', Number.isInteger, name, raw, fallback, min, max);
}

/** `--name`'s value as a number in [min, max], `fallback` when absent; UsageError otherwise. */
export function numberOption(
  name: string,
  raw: string | undefined,
  fallback: number,
  min: number,
  max: number,
): number {
  return rangeOption('a number', Number.isFinite, name, raw, fallback, min, max);
}

function rangeOption(
  what: string,
  valid: (value: number) => boolean,
  name: string,
  raw: string | undefined,
  fallback: number,
  min: number,
  max: number,
): number {
  if (raw === undefined) return fallback;
  const value = Number(raw);
  if (!valid(value) || value < min || value > max)
    throw new UsageError(`--${name} must be ${what} from ${min} to ${max}`);
  return value;
}

/** `--name`'s value, one of `allowed`, `fallback` when absent; UsageError otherwise. */
export function choiceOption<T extends string>(
  name: string,
  raw: string | undefined,
  allowed: readonly T[],
  fallback: T,
): T {
  if (raw === undefined) return fallback;
  if (!(allowed as readonly string[]).includes(raw))
    throw new UsageError(`--${name} must be one of ${allowed.join(', ')}`);
  return raw as T;
}

/**
 * `--name a,b,c`: a non-empty comma-separated subset of `allowed`; all of them when
 * absent or `all`.
 */
export function listOption<T extends string>(
  name: string,
  raw: string | undefined,
  allowed: readonly T[],
): T[] {
  if (raw === undefined || raw === 'all') return [...allowed];
  const items = raw
    .split(',')
    .map((k) => k.trim())
    .filter(Boolean);
  const bad = items.filter((k) => !(allowed as readonly string[]).includes(k));
  if (bad.length > 0 || items.length === 0)
    throw new UsageError(`--${name}: each must be one of ${allowed.join(', ')}`);
  return items as T[];
}

/** The exit code of a command line that names no valid run. */
export const USAGE_EXIT = 64;

/**
 * Runs `main` as a process's whole life: a UsageError (or node:util's TypeError for an
 * unknown option) prints `chaos: <message>` and the usage and exits 64 (0 for `--help`);
 * any other error prints its stack and exits 70; otherwise `main`'s exit code.
 */
export function runCli(
  name: string,
  usage: (argv: string[]) => string,
  main: (argv: string[]) => Promise<number>,
): void {
  const argv = process.argv.slice(2);
  main(argv).then(
    (code) => process.exit(code),
    (error: unknown) => {
      if (error instanceof UsageError || error instanceof TypeError) {
        if (error.message) console.error(`${name}: ${error.message}`);
        console.error(usage(argv));
        process.exit(error.message ? USAGE_EXIT : 0);
      }
      console.error(
        `[${name}] failed:`,
        error instanceof Error ? (error.stack ?? error.message) : error,
      );
      process.exit(70);
    },
  );
}
