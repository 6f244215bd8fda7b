import { parseArgs } from 'node:util';
import { ConfigurationError } from '../errors.js';
import { fractionOption, intOption } from '../option-checks.js';

/** One option of a command: what `parseArgs` needs plus what `--help` prints. */
export interface OptionSpec {
  type: 'string' | 'boolean';
  short?: string;
  /** Placeholder of a string option's value in help, e.g. `<duration>`. */
  value?: string;
  description: string;
}

/** A positional argument. */
export interface PositionalSpec {
  name: string;
  description: string;
}

/** Options and positionals of one command, as parsed. */
export interface ParsedArgs {
  values: Record<string, string | boolean | undefined>;
  positionals: string[];
}

/**
 * Parses `argv` against `options` with `node:util`'s `parseArgs`, leniently, then
 * checks every token itself: parseArgs's own strict errors name neither the command nor
 * where its help is, and word a missing value differently per case. Every problem is a
 * ConfigurationError naming the flag, which the CLI reports as a usage error (exit 2).
 */
export function parseCommandArgs(
  command: string,
  argv: string[],
  options: Record<string, OptionSpec>,
  positionals: readonly PositionalSpec[],
): ParsedArgs {
  const parsed = parseArgs({
    args: argv,
    options: Object.fromEntries(
      Object.entries(options).map(([name, o]) => [
        name,
        o.short === undefined ? { type: o.type } : { type: o.type, short: o.short },
      ]),
    ),
    strict: false,
    allowPositionals: true,
    tokens: true,
  });
  const help = `see \`effectively-once ${command} --help\``;
  const values: ParsedArgs['values'] = {};
  const given: string[] = [];
  for (const token of parsed.tokens) {
    if (token.kind === 'positional') given.push(token.value);
    if (token.kind !== 'option') continue;
    const spec = options[token.name];
    if (spec === undefined) {
      // A key like "-k1" reaches here as an option; say how to pass it.
      const dash =
        positionals.length === 0 ? '' : '; an argument starting with "-" goes after "--"';
      throw new ConfigurationError(token.rawName, `is not an option of ${command}${dash}; ${help}`);
    }
    const flag = `--${token.name}`;
    if (spec.type === 'boolean' && token.value !== undefined) {
      throw new ConfigurationError(flag, 'takes no value');
    }
    if (spec.type === 'string') {
      if (token.value === undefined) {
        throw new ConfigurationError(flag, `needs a value: ${flag} ${spec.value ?? '<value>'}`);
      }
      if (values[token.name] !== undefined) throw new ConfigurationError(flag, 'is given twice');
    }
    values[token.name] = spec.type === 'boolean' ? true : token.value;
  }
  if (given.length > positionals.length) {
    const extra = given[positionals.length] ?? '';
    throw new ConfigurationError(
      positionals.length === 0 ? command : `<${positionals[positionals.length - 1]?.name}>`,
      `unexpected argument "${extra}"; ${help}`,
    );
  }
  return { values, positionals: given };
}

/** A string option's value, or undefined; the type follows the spec. */
export function stringValue(args: ParsedArgs, name: string): string | undefined {
  const value = args.values[name];
  return typeof value === 'string' ? value : undefined;
}

/** Whether a boolean option was given. */
export function flag(args: ParsedArgs, name: string): boolean {
  return args.values[name] === true;
}

/** A whole number in [min, max], written in plain digits. */
export function parseInteger(text: string, option: string, min: number, max: number): number {
  if (!/^[0-9]+$/.test(text))
    throw new ConfigurationError(option, `"${text}" is not a whole number`);
  return intOption(option, Number(text), min, min, max);
}

/** A number above 0 and at most 1, written as a decimal (`0.5`, `1`). */
export function parseFraction(text: string, option: string): number {
  if (!/^(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)$/.test(text)) {
    throw new ConfigurationError(option, `"${text}" is not a decimal number`);
  }
  return fractionOption(option, Number(text), 1);
}

/** A comma-separated list of names, each one of `allowed`, without repeats. */
export function parseList(text: string, option: string, allowed: readonly string[]): string[] {
  const names = text.split(',').map((n) => n.trim());
  const unknown = names.filter((n) => !allowed.includes(n));
  if (names.length === 0 || unknown.length > 0) {
    throw new ConfigurationError(
      option,
      `"${unknown[0] ?? text}" is not one of ${allowed.join(', ')} (comma-separated)`,
    );
  }
  return [...new Set(names)];
}
