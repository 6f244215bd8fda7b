import type { BrokerName } from '../kit/services/private.js';
import { choiceOption, intOption, listOption, UsageError } from '../kit/args.js';
import { runDir } from '../kit/results.js';
import { parseArgs } from 'node:util';
import { SCENARIO_IDS, type ScenarioId } from './scenarios.js';
import { dataLayerList } from './data-layer-args.js';
import { DATA_LAYERS, type LayerName } from '../kit/data-layers/index.js';

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
  /**
   * `--data-layer`: (b) once more per layer and round, the handler writing through the
   * layer's transaction (kit/data-layers/), reported beside raw pg's (b).
   */
  dataLayers: LayerName[];
}

export const BENCH_USAGE = `usage: tsx bench/main.ts --broker sqs|kafka|rabbitmq [--messages 5000] [--concurrency 8] [--consumer-concurrency C] [--rounds 3]
                         [--scenarios a,b,c,d,e,f] [--batch-size 100] [--inbox-batch 10]
                         [--partitions <concurrency>] [--key-concurrency 1] [--kafka-client kafkajs] [--dedup-rows 0]
                         [--prune-while-consuming] [--memory-run] [--out .cache/runs/bench] [--name variant]
                         [--profile] [--data-layer pg,LAYER,...]
  --data-layer LIST runs (b) once more per layer of LIST, one of ${DATA_LAYERS.join(', ')} or all
                    (pg: raw pg's (b), always run beside them); without --scenarios: (b) and the layers only`;

export function parseBenchArgs(argv: readonly string[]): BenchOptions {
  const { values } = parseArgs({
    args: [...argv],
    options: {
      broker: { type: 'string' },
      messages: { type: 'string' },
      concurrency: { type: 'string' },
      'consumer-concurrency': { type: 'string' },
      rounds: { type: 'string' },
      scenarios: { type: 'string' },
      'batch-size': { type: 'string' },
      'inbox-batch': { type: 'string' },
      partitions: { type: 'string' },
      'key-concurrency': { type: 'string' },
      'kafka-client': { type: 'string' },
      'dedup-rows': { type: 'string' },
      'prune-while-consuming': { type: 'boolean', default: false },
      'memory-run': { type: 'boolean', default: false },
      out: { type: 'string', default: runDir('bench') },
      name: { type: 'string' },
      profile: { type: 'boolean', default: false },
      'data-layer': { type: 'string' },
      help: { type: 'boolean', default: false },
    },
    strict: true,
  });
  if (values.help) throw new UsageError('');
  const broker = choiceOption(
    'broker',
    values.broker,
    ['sqs', 'kafka', 'rabbitmq'] as const,
    'sqs',
  );
  if (values.broker === undefined) throw new UsageError('--broker must be sqs, kafka or rabbitmq');
  const concurrency = intOption('concurrency', values.concurrency, 8, 1, 200);
  const dataLayers = dataLayerList(values['data-layer']);
  // With layers and no --scenarios: (b) alone, the raw-pg run each layer's is beside.
  const scenarios = listOption(
    'scenarios',
    values.scenarios ?? (dataLayers === undefined ? undefined : 'b'),
    SCENARIO_IDS,
  );
  if (dataLayers !== undefined && !scenarios.includes('b'))
    throw new UsageError('--data-layer runs beside (b): keep b in --scenarios');
  const kafkaClient = choiceOption(
    'kafka-client',
    values['kafka-client'],
    ['kafkajs', 'platformatic'] as const,
    'kafkajs',
  );
  const dedupRows = intOption('dedup-rows', values['dedup-rows'], 0, 0, 100_000_000);
  const pruneWhileConsuming = values['prune-while-consuming'];
  if (pruneWhileConsuming && (dedupRows === 0 || !scenarios.some((s) => s === 'b' || s === 'c')))
    throw new UsageError(
      '--prune-while-consuming prunes the --dedup-rows history in b and c: give both',
    );
  return {
    broker,
    messages: intOption('messages', values.messages, 5000, 1, 10_000_000),
    concurrency,
    consumerConcurrency: intOption(
      'consumer-concurrency',
      values['consumer-concurrency'],
      concurrency,
      1,
      1000,
    ),
    rounds: intOption('rounds', values.rounds, 3, 1, 50),
    scenarios,
    batchSize: intOption('batch-size', values['batch-size'], 100, 1, 10_000),
    inboxBatch: intOption('inbox-batch', values['inbox-batch'], 10, 1, 10_000),
    partitions: intOption('partitions', values.partitions, concurrency, 1, 1000),
    keyConcurrency: intOption('key-concurrency', values['key-concurrency'], 1, 1, 1000),
    kafkaClient,
    dedupRows,
    pruneWhileConsuming,
    memoryRun: values['memory-run'],
    out: values.out,
    name: values.name === undefined ? undefined : safeName(values.name),
    profile: values.profile,
    dataLayers: dataLayers ?? [],
  };
}

function safeName(name: string): string {
  if (!/^[a-z0-9][a-z0-9_-]{0,40}$/i.test(name))
    throw new UsageError('--name: letters, digits, - and _ only');
  return name;
}
