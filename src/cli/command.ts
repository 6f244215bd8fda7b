import type { Pool } from 'pg';
import type { TableRef } from '../store/identifiers.js';
import type { OptionSpec, ParsedArgs, PositionalSpec } from './args.js';

/** What a command prints: a document for `--json`, text otherwise, and its exit code. */
export interface CommandOutput {
  json: unknown;
  text: string;
  /** Default {@link EXIT}.ok. */
  exitCode?: number;
}

/** What a command runs with. */
export interface CommandContext {
  args: ParsedArgs;
  /** The dedup table, from `--schema` and `--table` (validated). */
  ref: TableRef;
  /** The pool of `--database-url` / `DATABASE_URL`, opened on first use. */
  pool(): Promise<Pool>;
  /** Aborted on SIGINT / SIGTERM (only `graceful` commands see it). */
  signal: AbortSignal;
}

/** One `effectively-once <command>`: its help and its work. */
export interface Command {
  name: string;
  /** One line, for the program's help. */
  summary: string;
  /** What follows the command's name in its usage line. */
  usage: string;
  /** Paragraphs of the command's help. */
  description: string;
  options: Record<string, OptionSpec>;
  positionals: readonly PositionalSpec[];
  examples: readonly string[];
  /** Stops at a safe point on SIGINT / SIGTERM and reports what it did; others just exit. */
  graceful?: boolean;
  run(ctx: CommandContext): Promise<CommandOutput>;
}

/** Exit codes, documented in docs/cli.md and in `--help`. */
export const EXIT = {
  ok: 0,
  /** The database refused or failed, or another runtime failure. */
  failure: 1,
  /** Unknown command or option, missing or bad value, bad name or key. */
  usage: 2,
  /** `inspect`: the key has no committed claim. */
  notClaimed: 3,
  /** SIGINT / SIGTERM. */
  interrupted: 130,
} as const;
