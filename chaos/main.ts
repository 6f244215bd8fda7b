/**
 * The chaos harness: `tsx chaos/main.ts [--target consumer|http|outbox|steps] [options]`. Each
 * target is a door of the library under its own faults (`--target T --help` lists
 * them); Postgres failovers (`--failovers N`, chaos/failover/) are a fault every target
 * takes. Prints one `chaos: ...` line on stdout (the progress log goes to stderr) and
 * exits non-zero on any double, loss or timeout; 64 on a bad command line.
 */
import { runCli, UsageError } from '../kit/args.js';
import { REPLICA_SAFE_ENV, takeReplicaSafe } from './failover/replica-safe.js';

/** One door under chaos: its options, its run, and the one line that sums a run up. */
interface Target {
  usage(): string;
  run(argv: string[]): Promise<number>;
}

/** Target name → its module, loaded only when named. */
const TARGETS: Record<string, () => Promise<Target>> = {
  /** The consumer over SQS or Kafka: chaos/consumer/. */
  consumer: async () => {
    const [args, { runChaos }, summary] = await Promise.all([
      import('./consumer/args.js'),
      import('./consumer/run.js'),
      import('./consumer/summary.js'),
    ]);
    return {
      usage: args.usage,
      run: async (argv) => {
        const result = await runChaos(args.parseChaosArgs(argv));
        console.log(summary.summaryLine(result));
        return summary.exitCode(result);
      },
    };
  },
  /** The Idempotency-Key side, behind a fault proxy: chaos/http/. */
  http: async () => {
    const [args, { runHttpChaos }, summary] = await Promise.all([
      import('./http/args.js'),
      import('./http/run.js'),
      import('./http/summary.js'),
    ]);
    return {
      usage: args.httpUsage,
      run: async (argv) => {
        const result = await runHttpChaos(args.parseHttpChaosArgs(argv));
        console.log(summary.httpSummaryLine(result));
        return summary.httpExitCode(result);
      },
    };
  },
  /** Steps with recovery points: a flow's DB steps and provider call under kills: chaos/steps/. */
  steps: async () => {
    const [args, { runStepsChaos }, summary] = await Promise.all([
      import('./steps/args.js'),
      import('./steps/run.js'),
      import('./steps/summary.js'),
    ]);
    return {
      usage: args.stepsUsage,
      run: async (argv) => {
        const result = await runStepsChaos(args.parseStepsChaosArgs(argv));
        console.log(summary.stepsSummaryLine(result));
        return summary.stepsExitCode(result);
      },
    };
  },
  /** The outbox and its relay between two services: chaos/outbox/. */
  outbox: async () => {
    const [args, { runOutboxChaos }, summary] = await Promise.all([
      import('./outbox/args.js'),
      import('./outbox/run.js'),
      import('./outbox/summary.js'),
    ]);
    return {
      usage: args.outboxUsage,
      run: async (argv) => {
        const result = await runOutboxChaos(args.parseOutboxChaosArgs(argv));
        console.log(summary.outboxSummaryLine(result));
        return summary.outboxExitCode(result);
      },
    };
  },
};

/** `--target T` / `--target=T`, default `consumer`; the consumer's parser takes no `--target`. */
function targetOf(argv: string[]): { name: string; argv: string[] } {
  const i = argv.findIndex((a) => a === '--target' || a.startsWith('--target='));
  if (i < 0) return { name: 'consumer', argv };
  const arg = argv[i] ?? '';
  const name = arg.startsWith('--target=') ? arg.slice('--target='.length) : (argv[i + 1] ?? '');
  if (name !== 'consumer') return { name, argv };
  return { name, argv: argv.filter((_, j) => j !== i && (arg !== '--target' || j !== i + 1)) };
}

const usages: Record<string, string> = {};
runCli(
  'chaos',
  (argv) =>
    usages[targetOf(argv).name] ??
    `usage: tsx chaos/main.ts --target ${Object.keys(TARGETS).join('|')} [options] (--help)`,
  async (given) => {
    const replicaSafe = takeReplicaSafe(given);
    if (replicaSafe.on) {
      if (!replicaSafe.argv.some((a) => a.startsWith('--failovers')))
        throw new UsageError('--replica-safe is for runs with --failovers');
      process.env[REPLICA_SAFE_ENV] = '1';
    }
    const { name, argv } = targetOf(replicaSafe.argv);
    const load = TARGETS[name];
    if (load === undefined)
      throw new UsageError(`--target must be one of ${Object.keys(TARGETS).join(', ')}`);
    const target = await load();
    usages[name] = target.usage();
    return target.run(argv);
  },
);
