import { runDir } from '../kit/results.js';
import { parseArgs } from 'node:util';
import { SCENARIO_IDS, type ScenarioId } from './scenarios.js';

export type BrokerName = 'sqs' | 'kafka';

/** Everything a bench run is configured with; see `bench/README.md`. */
export interface BenchOptions {
  broker: BrokerName;
  /** Messages pre-filled and drained per scenario run. */
  messages: number;
  /** Pool size, and what each scenario runs at once (see README for each scenario's meaning). */
  concurrency: number;
  /** `createConsumer` `concurrency` in b and c; default `concurrency` (the pool stays `concurrency`). */
  consumerConcurrency: number;
  /** How many times the interleaved sequence of scenarios is repeated; the median is reported. */
  rounds: number;
  /** Scenarios to run, in this order within a round. */
  scenarios: ScenarioId[];
  /** Batch mode's `batch.maxSize` (scenario c). */
  batchSize: number;
  /** Inbox rows one worker transaction takes (scenario f). */
  inboxBatch: number;
  /** Kafka partitions of each scenario's topic. */
  partitions: number;
  /** kafkaSource `keyConcurrency` in b and c (records of one partition in flight, distinct keys). */
  keyConcurrency: number;
  /** The client under kafkaSource in b and c (a, d and f are kafkajs's own loops). */
  kafkaClient: 'kafkajs' | 'platformatic';
  /** Extra runs of b, c, e and g with this many rows of history in `processed_messages`; 0 skips them. */
  dedupRows: number;
  /** Extra runs of b and c against the history with the consumer's `retention` pruning it. */
  pruneWhileConsuming: boolean;
  /** Sample each run's RSS and heap through the drain and judge whether they stay flat. */
  memoryRun: boolean;
  /** Directory for `latest-<broker>[-<name>].{md,json}`. */
  out: string;
  /** Suffix of the output files, to keep a variant run next to the default one. */
  name: string | undefined;
  /** Write a V8 CPU profile of every scenario process to `<out>/profiles/`. */
  profile: boolean;
}

const USAGE = `usage: tsx bench/main.ts --broker sqs|kafka [--messages 5000] [--concurrency 8] [--consumer-concurrency C] [--rounds 3]
                         [--scenarios a,b,c,d,e,f] [--batch-size 100] [--inbox-batch 10]
                         [--partitions <concurrency>] [--key-concurrency 1] [--kafka-client kafkajs] [--dedup-rows 0]
                         [--prune-while-consuming] [--memory-run] [--out .cache/runs/bench] [--name variant]
                         [--profile]`;

export function parseBenchArgs(argv: readonly string[]): BenchOptions {
  const { values } = parseArgs({
    args: [...argv],
    options: {
      broker: { type: 'string' },
      messages: { type: 'string', default: '5000' },
      concurrency: { type: 'string', default: '8' },
      'consumer-concurrency': { type: 'string' },
      rounds: { type: 'string', default: '3' },
      scenarios: { type: 'string', default: SCENARIO_IDS.join(',') },
      'batch-size': { type: 'string', default: '100' },
      'inbox-batch': { type: 'string', default: '10' },
      partitions: { type: 'string' },
      'key-concurrency': { type: 'string', default: '1' },
      'kafka-client': { type: 'string', default: 'kafkajs' },
      'dedup-rows': { type: 'string', default: '0' },
      'prune-while-consuming': { type: 'boolean', default: false },
      'memory-run': { type: 'boolean', default: false },
      out: { type: 'string', default: runDir('bench') },
      name: { type: 'string' },
      profile: { type: 'boolean', default: false },
      help: { type: 'boolean', default: false },
    },
    strict: true,
  });
  if (values.help) {
    console.log(USAGE);
    process.exit(0);
  }
  const broker = values.broker;
  if (broker !== 'sqs' && broker !== 'kafka') fail(`--broker must be sqs or kafka\n${USAGE}`);
  const concurrency = int('concurrency', values.concurrency, 1, 200);
  const scenarios = values.scenarios
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  for (const s of scenarios) {
    if (!(SCENARIO_IDS as readonly string[]).includes(s))
      fail(`--scenarios: unknown scenario "${s}" (known: ${SCENARIO_IDS.join(',')})`);
  }
  if (scenarios.length === 0) fail('--scenarios: give at least one');
  const kafkaClient = values['kafka-client'];
  if (kafkaClient !== 'kafkajs' && kafkaClient !== 'platformatic')
    fail('--kafka-client must be kafkajs or platformatic (@platformatic/kafka, Node >= 22.22)');
  const dedupRows = int('dedup-rows', values['dedup-rows'], 0, 100_000_000);
  const pruneWhileConsuming = values['prune-while-consuming'];
  if (pruneWhileConsuming && (dedupRows === 0 || !scenarios.some((s) => s === 'b' || s === 'c')))
    fail('--prune-while-consuming prunes the --dedup-rows history in b and c: give both');
  return {
    broker,
    messages: int('messages', values.messages, 1, 10_000_000),
    concurrency,
    consumerConcurrency: int(
      'consumer-concurrency',
      values['consumer-concurrency'] ?? String(concurrency),
      1,
      1000,
    ),
    rounds: int('rounds', values.rounds, 1, 50),
    scenarios: scenarios as ScenarioId[],
    batchSize: int('batch-size', values['batch-size'], 1, 10_000),
    inboxBatch: int('inbox-batch', values['inbox-batch'], 1, 10_000),
    partitions: int('partitions', values.partitions ?? String(concurrency), 1, 1000),
    keyConcurrency: int('key-concurrency', values['key-concurrency'], 1, 1000),
    kafkaClient,
    dedupRows,
    pruneWhileConsuming,
    memoryRun: values['memory-run'],
    out: values.out,
    name: values.name === undefined ? undefined : safeName(values.name),
    profile: values.profile,
  };
}

/** `--name`'s value as an integer in [min, max]; throws an Error saying the range otherwise. */
export function integerOption(name: string, raw: string, min: number, max: number): number {
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min || value > max)
    throw new Error(`--${name} must be an integer from ${min} to ${max}`);
  return value;
}

function int(name: string, raw: string, min: number, max: number): number {
  try {
    return integerOption(name, raw, min, max);
  } catch (error) {
    return fail((error as Error).message);
  }
}

function safeName(name: string): string {
  if (!/^[a-z0-9][a-z0-9_-]{0,40}$/i.test(name)) fail('--name: letters, digits, - and _ only');
  return name;
}

function fail(message: string): never {
  console.error(message);
  process.exit(2);
}
