import { describe, expect, it } from '@jest/globals';
import { ConfigurationError } from '../../../src/errors.js';
import {
  parseCommandArgs,
  parseFraction,
  parseInteger,
  parseList,
  type OptionSpec,
} from '../../../src/cli/args.js';
import { parseDuration } from '../../../src/cli/duration.js';

/** The thrown error's message, or a marker when nothing was thrown (so a mismatch shows). */
function failure(fn: () => unknown): string {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigurationError);
    return (error as ConfigurationError).message;
  }
  return 'did not throw';
}

describe('parseDuration', () => {
  it.each([
    ['90s', 90_000],
    ['15m', 15 * 60_000],
    ['12h', 12 * 3_600_000],
    ['7d', 7 * 86_400_000],
    ['2w', 14 * 86_400_000],
    ['1s', 1000],
    ['365d', 365 * 86_400_000],
  ])('%s is %d ms', (text, ms) => {
    expect(parseDuration(text, '--older-than')).toBe(ms);
  });

  it.each([
    '7',
    '7x',
    '7D',
    '1.5d',
    '-7d',
    '+7d',
    ' 7d',
    '7d ',
    '1d12h',
    'd',
    '',
    '7 d',
    '7dd',
    '0x10s',
    '1e3s',
  ])('refuses %j, naming the flag and the accepted form', (text) => {
    expect(failure(() => parseDuration(text, '--older-than'))).toBe(
      `Invalid option "--older-than": ${JSON.stringify(text)} is not a duration: write a whole number and one unit, s, m (minutes), h, d or w, e.g. 90s, 15m, 7d, 2w`,
    );
  });

  it('refuses zero (a window of nothing) and a length beyond exact milliseconds', () => {
    expect(failure(() => parseDuration('0d', '--window'))).toBe(
      'Invalid option "--window": "0d" must be longer than zero',
    );
    expect(failure(() => parseDuration('99999999999w', '--window'))).toBe(
      'Invalid option "--window": "99999999999w" is too long',
    );
  });
});

describe('value parsers', () => {
  it('parseInteger takes plain digits within the range only', () => {
    expect(parseInteger('500', '--batch-size', 1, 100_000)).toBe(500);
    expect(parseInteger('100000', '--batch-size', 1, 100_000)).toBe(100_000);
    for (const bad of ['1.5', '1e3', '-1', '', ' 5', '0x10', 'ten']) {
      expect(failure(() => parseInteger(bad, '--batch-size', 1, 100_000))).toBe(
        `Invalid option "--batch-size": ${JSON.stringify(bad)} is not a whole number`,
      );
    }
    for (const out of ['0', '100001']) {
      expect(failure(() => parseInteger(out, '--batch-size', 1, 100_000))).toBe(
        'Invalid option "--batch-size": must be an integer from 1 to 100000',
      );
    }
  });

  it('parseFraction takes a decimal above 0 and at most 1', () => {
    expect(parseFraction('0.5', '--duty-cycle')).toBe(0.5);
    expect(parseFraction('.25', '--duty-cycle')).toBe(0.25);
    expect(parseFraction('1', '--duty-cycle')).toBe(1);
    for (const bad of ['half', '1/2', '', '5e-1', '-0.5']) {
      expect(failure(() => parseFraction(bad, '--duty-cycle'))).toBe(
        `Invalid option "--duty-cycle": ${JSON.stringify(bad)} is not a decimal number`,
      );
    }
    for (const out of ['0', '1.5', '0.0']) {
      expect(failure(() => parseFraction(out, '--duty-cycle'))).toBe(
        'Invalid option "--duty-cycle": must be a number above 0 and at most 1',
      );
    }
  });

  it('parseList takes known names, comma-separated, without repeats', () => {
    const allowed = ['consumer', 'kafka-offsets'];
    expect(parseList('consumer,kafka-offsets', '--only', allowed)).toEqual(allowed);
    expect(parseList('kafka-offsets, consumer,consumer', '--only', allowed)).toEqual([
      'kafka-offsets',
      'consumer',
    ]);
    expect(failure(() => parseList('consumer,outbox', '--only', allowed))).toBe(
      'Invalid option "--only": "outbox" is not one of consumer, kafka-offsets (comma-separated)',
    );
    expect(failure(() => parseList('', '--only', allowed))).toContain('"" is not one of');
  });
});

describe('parseCommandArgs', () => {
  const options: Record<string, OptionSpec> = {
    'older-than': { type: 'string', value: '<duration>', description: '' },
    'dry-run': { type: 'boolean', description: '' },
    help: { type: 'boolean', short: 'h', description: '' },
  };
  const parse = (
    argv: string[],
    positionals = [] as Array<{ name: string; description: string }>,
  ) => parseCommandArgs('prune', argv, options, positionals);

  it('reads string and boolean options in both spellings, and positionals', () => {
    expect(parse(['--older-than', '7d', '--dry-run'])).toEqual({
      values: { 'older-than': '7d', 'dry-run': true },
      positionals: [],
    });
    expect(parse(['--older-than=7d', '-h']).values).toEqual({ 'older-than': '7d', help: true });
    expect(parse(['k1', '--dry-run'], [{ name: 'key', description: '' }]).positionals).toEqual([
      'k1',
    ]);
    // After "--" a key may start with "-".
    expect(parse(['--', '-k1'], [{ name: 'key', description: '' }]).positionals).toEqual(['-k1']);
  });

  it('refuses unknown options, missing values, values of switches, repeats and extra arguments', () => {
    expect(failure(() => parse(['--olderthan', '7d']))).toBe(
      'Invalid option "--olderthan": is not an option of prune; see `effectively-once prune --help`',
    );
    expect(failure(() => parse(['-x']))).toBe(
      'Invalid option "-x": is not an option of prune; see `effectively-once prune --help`',
    );
    expect(failure(() => parse(['--older-than']))).toBe(
      'Invalid option "--older-than": needs a value: --older-than <duration>',
    );
    expect(failure(() => parse(['--dry-run=yes']))).toBe(
      'Invalid option "--dry-run": takes no value',
    );
    expect(failure(() => parse(['--older-than', '7d', '--older-than', '1d']))).toBe(
      'Invalid option "--older-than": is given twice',
    );
    expect(failure(() => parse(['7d']))).toBe(
      'Invalid option "prune": unexpected argument "7d"; see `effectively-once prune --help`',
    );
    expect(failure(() => parse(['k1', 'k2'], [{ name: 'key', description: '' }]))).toBe(
      'Invalid option "<key>": unexpected argument "k2"; see `effectively-once prune --help`',
    );
  });
});
