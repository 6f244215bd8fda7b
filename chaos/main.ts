/**
 * The chaos harness: `tsx chaos/main.ts --broker sqs|kafka --messages N --workers W
 * [--kills K] [--poison P] [--seed S]`. Prints one `chaos: ...` line on stdout (the
 * progress log goes to stderr) and exits non-zero on any double, loss or timeout.
 */
import { UsageError, parseChaosArgs, usage } from './args.js';
import { runChaos } from './run.js';
import { exitCode, summaryLine } from './summary.js';

async function main(): Promise<number> {
  let args;
  try {
    args = parseChaosArgs(process.argv.slice(2));
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
