import type { OptionSpec } from './args.js';
import { EXIT, type Command } from './command.js';

/** Options every command takes. */
export const COMMON_OPTIONS: Record<string, OptionSpec> = {
  'database-url': {
    type: 'string',
    value: '<url>',
    description: 'Postgres connection string (default: $DATABASE_URL)',
  },
  schema: {
    type: 'string',
    value: '<name>',
    description: 'Schema of the tables (default: public)',
  },
  table: {
    type: 'string',
    value: '<name>',
    description: 'Dedup table (default: processed_messages)',
  },
  json: { type: 'boolean', description: 'Print one JSON document on stdout instead of text' },
  help: { type: 'boolean', short: 'h', description: 'Show this help' },
};

const EXIT_CODES: Array<[number, string]> = [
  [EXIT.ok, 'done'],
  [EXIT.failure, 'failed: the database refused or could not be reached, a statement failed'],
  [EXIT.usage, 'usage error: unknown command or option, missing or bad value, bad name or key'],
  [EXIT.notClaimed, 'inspect: the key has no committed claim'],
  [EXIT.interrupted, 'interrupted (SIGINT/SIGTERM); prune first reports what it deleted'],
];

function optionLines(options: Record<string, OptionSpec>): string[] {
  const left = Object.entries(options).map(
    ([name, o]) =>
      `${o.short === undefined ? '    ' : `-${o.short}, `}--${name}${o.value === undefined ? '' : ` ${o.value}`}`,
  );
  const width = Math.max(...left.map((l) => l.length));
  return Object.values(options).map(
    (o, i) => `  ${(left[i] ?? '').padEnd(width)}  ${o.description}`,
  );
}

function exitCodeLines(): string[] {
  return EXIT_CODES.map(([code, meaning]) => `  ${String(code).padStart(3)}  ${meaning}`);
}

/** `effectively-once --help`. */
export function programHelp(commands: readonly Command[]): string {
  const width = Math.max(...commands.map((c) => c.name.length));
  return [
    'Usage: effectively-once <command> [options]',
    '',
    "Manage effectively-once's Postgres tables: migrate them, prune the dedup window, see",
    'what they hold, look up a key.',
    '',
    'Commands:',
    ...commands.map((c) => `  ${c.name.padEnd(width)}  ${c.summary}`),
    '',
    'Options of every command:',
    ...optionLines(COMMON_OPTIONS),
    '',
    'Exit codes:',
    ...exitCodeLines(),
    '',
    'Run `effectively-once <command> --help` for its options. Docs: docs/cli.md.',
  ].join('\n');
}

/** `effectively-once <command> --help`. */
export function commandHelp(command: Command): string {
  const wrap = (text: string): string[] => {
    const out: string[] = [];
    let line = '';
    for (const word of text.split(/\s+/)) {
      if (line !== '' && line.length + 1 + word.length > 88) {
        out.push(line);
        line = word;
      } else line = line === '' ? word : `${line} ${word}`;
    }
    return [...out, line];
  };
  return [
    `Usage: effectively-once ${command.name} ${command.usage}`,
    '',
    // Paragraphs are reflowed; one starting with two spaces is a preformatted list.
    ...command.description
      .split('\n\n')
      .flatMap((p, i) => [
        ...(i > 0 ? [''] : []),
        ...(p.startsWith('  ') ? p.split('\n') : wrap(p)),
      ]),
    '',
    ...(command.positionals.length === 0
      ? []
      : ['Arguments:', ...command.positionals.map((p) => `  <${p.name}>  ${p.description}`), '']),
    'Options:',
    ...optionLines({ ...command.options, ...COMMON_OPTIONS }),
    '',
    'Examples:',
    ...command.examples.map((e) => `  ${e}`),
    '',
    'Exit codes:',
    ...exitCodeLines(),
  ].join('\n');
}
