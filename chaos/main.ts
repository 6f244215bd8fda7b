/**
 * The chaos harness: `tsx chaos/main.ts --broker sqs|kafka --messages N --workers W
 * [--kills K] [--poison P] [--seed S]`, or `--target http [--payments N ...]` for the
 * Idempotency-Key side (chaos/http/), or `--target outbox` for the outbox and its relay
 * between two services (chaos/outbox/). Prints one `chaos: ...` line on stdout (the
 * progress log goes to stderr) and exits non-zero on any double, loss or timeout.
 */
import { UsageError, parseChaosArgs, usage } from './args.js';
import { httpUsage, parseHttpChaosArgs } from './http/args.js';
import { runChaos } from './run.js';
import { exitCode, summaryLine } from './summary.js';

async function main(): Promise<number> {
  const argv = process.argv.slice(2);
  const target = argv.findIndex((a) => a === '--target' || a.startsWith('--target='));
  if (target >= 0) {
    const value = argv[target]?.startsWith('--target=')
      ? argv[target].slice('--target='.length)
      : argv[target + 1];
    return value === 'outbox' ? outbox(argv) : http(argv);
  }
  let args;
  try {
    args = parseChaosArgs(argv);
  } catch (error) {
    if (!(error instanceof UsageError) && !(error instanceof TypeError)) throw error;
    if (error.message) console.error(`chaos: ${error.message}`);
    console.error(usage());
    return error.message ? 64 : 0;
  }
  const result = await runChaos(args);
  console.log(summaryLine(result));
  return exitCode(result);
}

async function http(argv: string[]): Promise<number> {
  let args;
  try {
    args = parseHttpChaosArgs(argv);
  } catch (error) {
    if (!(error instanceof UsageError) && !(error instanceof TypeError)) throw error;
    if (error.message) console.error(`chaos: ${error.message}`);
    console.error(httpUsage());
    return error.message ? 64 : 0;
  }
  const { runHttpChaos } = await import('./http/run.js');
  const { httpExitCode, httpSummaryLine } = await import('./http/summary.js');
  const result = await runHttpChaos(args);
  console.log(httpSummaryLine(result));
  return httpExitCode(result);
}

async function outbox(argv: string[]): Promise<number> {
  const { outboxUsage, parseOutboxChaosArgs } = await import('./outbox/args.js');
  let args;
  try {
    args = parseOutboxChaosArgs(argv);
  } catch (error) {
    if (!(error instanceof UsageError) && !(error instanceof TypeError)) throw error;
    if (error.message) console.error(`chaos: ${error.message}`);
    console.error(outboxUsage());
    return error.message ? 64 : 0;
  }
  const { runOutboxChaos } = await import('./outbox/run.js');
  const { outboxExitCode, outboxSummaryLine } = await import('./outbox/summary.js');
  const result = await runOutboxChaos(args);
  console.log(outboxSummaryLine(result));
  return outboxExitCode(result);
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    console.error(
      '[chaos] failed:',
      error instanceof Error ? (error.stack ?? error.message) : error,
    );
    process.exit(70);
  },
);
