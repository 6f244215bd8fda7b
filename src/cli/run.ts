import pg from 'pg';
import { ConfigurationError, EffectivelyOnceError, InvalidKeyError, describe } from '../errors.js';
import { quoteIdentifier, tableRef } from '../store/identifiers.js';
import { sqlstateOf } from '../store/pg-errors.js';
import { parseCommandArgs, stringValue, flag } from './args.js';
import { EXIT, type Command, type CommandOutput } from './command.js';
import { inspectCommand } from './commands/inspect.js';
import { outboxCommand } from './commands/outbox.js';
import { migrateCommand } from './commands/migrate.js';
import { pruneCommand } from './commands/prune.js';
import { statsCommand } from './commands/stats.js';
import { COMMON_OPTIONS, commandHelp, programHelp } from './help.js';

/** Every command, in the order `--help` lists them. */
export const COMMANDS: readonly Command[] = [
  migrateCommand,
  pruneCommand,
  statsCommand,
  inspectCommand,
  outboxCommand,
];

/** Where the CLI reads and writes; a test passes its own. */
export interface CliIo {
  /** Writes one block of output (a newline is added). */
  stdout(text: string): void;
  stderr(text: string): void;
  env: Readonly<Record<string, string | undefined>>;
  /** Aborted on SIGINT / SIGTERM. */
  signal: AbortSignal;
}

const INTERRUPTED = Symbol('interrupted');

/**
 * Runs `effectively-once <argv>` and resolves with its exit code ({@link EXIT}). Every
 * failure is reported as one line on stderr (a JSON document with `--json`), never
 * thrown.
 */
export async function runCli(argv: readonly string[], io: CliIo): Promise<number> {
  const end = argv.indexOf('--');
  const json = (end < 0 ? argv : argv.slice(0, end)).includes('--json');
  let command: Command | undefined;
  try {
    const [name, ...rest] = argv;
    if (name === undefined) {
      io.stderr(programHelp(COMMANDS));
      return EXIT.usage;
    }
    if (name === '--help' || name === '-h' || (name === 'help' && rest.length === 0)) {
      io.stdout(programHelp(COMMANDS));
      return EXIT.ok;
    }
    if (name === 'help') return runCli([rest[0] ?? '', '--help'], io);
    command = COMMANDS.find((c) => c.name === name);
    if (command === undefined) {
      throw new ConfigurationError(
        'command',
        `"${name}" is not a command: use ${COMMANDS.map((c) => c.name).join(', ')} (see effectively-once --help)`,
      );
    }
    const args = parseCommandArgs(
      command.name,
      rest,
      { ...command.options, ...COMMON_OPTIONS },
      command.positionals,
    );
    if (flag(args, 'help')) {
      io.stdout(commandHelp(command));
      return EXIT.ok;
    }
    const missing = command.positionals[args.positionals.length];
    if (missing !== undefined) {
      throw new ConfigurationError(
        `<${missing.name}>`,
        `is required: effectively-once ${command.name} ${command.usage}`,
      );
    }
    const ref = tableRef({
      schema: stringValue(args, 'schema'),
      table: stringValue(args, 'table'),
    });
    quoteIdentifier(ref.schema, '--schema');
    quoteIdentifier(ref.table, '--table');
    const connection = lazyPool(stringValue(args, 'database-url') ?? io.env['DATABASE_URL']);
    let output: CommandOutput | typeof INTERRUPTED;
    try {
      const running = command.run({ args, ref, pool: connection.get, signal: io.signal });
      output = command.graceful === true ? await running : await untilAborted(running, io.signal);
    } finally {
      // Interrupted: a statement may still run; the process exits without waiting for it.
      if (!io.signal.aborted || command.graceful === true) await connection.close();
      else void connection.close().catch(() => undefined);
    }
    if (output === INTERRUPTED) {
      io.stderr(
        json
          ? JSON.stringify({ error: { code: 'EO_INTERRUPTED', message: 'interrupted' } })
          : `effectively-once ${command.name}: interrupted`,
      );
      return EXIT.interrupted;
    }
    io.stdout(json ? JSON.stringify(output.json, null, 2) : output.text);
    return output.exitCode ?? EXIT.ok;
  } catch (error) {
    io.stderr(errorReport(error, command, json));
    return exitCodeOf(error);
  }
}

/** 2 for bad input, 1 for everything else. */
export function exitCodeOf(error: unknown): number {
  return error instanceof ConfigurationError || error instanceof InvalidKeyError
    ? EXIT.usage
    : EXIT.failure;
}

function errorReport(error: unknown, command: Command | undefined, json: boolean): string {
  const prefix = `effectively-once${command === undefined ? '' : ` ${command.name}`}`;
  const sqlstate = sqlstateOf(error instanceof Error ? error.cause : undefined);
  let message = describe(error);
  // An unmigrated or misnamed table is the usual first failure; say what to do.
  if (sqlstate === '42P01')
    message +=
      ' (create the tables with `effectively-once migrate`, or check --schema / --table / --http-keys-table)';
  if (json) {
    const code = error instanceof EffectivelyOnceError ? error.code : 'EO_UNEXPECTED';
    const details = error instanceof EffectivelyOnceError ? error.details : {};
    return JSON.stringify({
      error: { code, message, ...(sqlstate === undefined ? {} : { sqlstate }), details },
    });
  }
  if (error instanceof EffectivelyOnceError) return `${prefix}: ${error.code}: ${message}`;
  return `${prefix}: unexpected error: ${message}`;
}

function lazyPool(url: string | undefined): {
  get: () => Promise<pg.Pool>;
  close: () => Promise<void>;
} {
  let pool: pg.Pool | undefined;
  return {
    get: async () => {
      if (url === undefined || url === '') {
        throw new ConfigurationError(
          '--database-url',
          'is missing: pass --database-url or set DATABASE_URL',
        );
      }
      if (pool === undefined) {
        pool = new pg.Pool({
          connectionString: url,
          max: 2,
          connectionTimeoutMillis: 10_000,
          application_name: 'effectively-once-cli',
        });
        // An idle client's connection dropping must not crash the process; the next query fails instead.
        pool.on('error', () => undefined);
      }
      return pool;
    },
    close: async () => {
      await pool?.end();
    },
  };
}

function untilAborted<T>(work: Promise<T>, signal: AbortSignal): Promise<T | typeof INTERRUPTED> {
  if (signal.aborted) return Promise.resolve(INTERRUPTED);
  return new Promise((resolve, reject) => {
    const onAbort = (): void => resolve(INTERRUPTED);
    signal.addEventListener('abort', onAbort, { once: true });
    work.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(error instanceof Error ? error : new Error(describe(error)));
      },
    );
  });
}
