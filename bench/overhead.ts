/**
 * The library's own cost per message, with the I/O taken away: a pool whose queries
 * resolve at once and a source that delivers as fast as the consumer takes them (the
 * core), or kafkajs replaced by the unit tests' fake consumer feeding 500-record
 * batches to 8 partitions (the Kafka adapter + core). What remains is the runner,
 * dispatcher, settler, payload hash, claim SQL building and the adapter's per-record
 * work; compare it with a real run's µs per message (1e6 / msg/s).
 *
 *   npx tsx bench/overhead.ts [--messages 200000] [--rounds 3]
 */
import { parseArgs } from 'node:util';
import type { Pool } from 'pg';
import { createConsumer, type Delivery, type Source } from 'effectively-once';
import { kafkaSource } from 'effectively-once/kafka';
import { FakeConsumer, FakeProducer, messages } from '../kit/kafka-fakes.js';
import { median } from './stats.js';

type Mode = 'per-message' | 'batch';
interface Body {
  n: number;
}

/**
 * A pg stand-in: the claim owns every key it is given, the verified COMMIT finds the
 * claim's transaction, every other statement succeeds.
 */
function instantPool(): Pool {
  const claimed = (inserted: { rowCount: number; rows: unknown[] }) =>
    Promise.resolve([
      { command: 'BEGIN' },
      { command: 'SELECT' },
      { command: 'SET' },
      { command: 'INSERT', ...inserted },
      { command: 'SELECT', rows: [{ xid: '1' }] },
    ]);
  const client = {
    query(text: string) {
      if (text.startsWith('SELECT CASE'))
        return Promise.resolve([{ command: 'SELECT' }, { command: 'COMMIT' }]);
      if (!text.startsWith('BEGIN')) return Promise.resolve({ rowCount: 1, rows: [] });
      // Batch claims carry their keys as an array literal inside unnest(...::text[]).
      const literal = /unnest\((.*?)::text\[\]/s.exec(text)?.[1];
      if (literal === undefined) return claimed({ rowCount: 1, rows: [] });
      const keys = [...literal.matchAll(/"([^"]+)"/g)].map((m) => ({ message_key: m[1] }));
      return claimed({ rowCount: keys.length, rows: keys });
    },
    on() {},
    off() {},
    release() {},
  };
  return {
    connect: () => Promise.resolve(client),
    query: () => Promise.resolve({ rows: [] }),
    options: { max: 1000 },
  } as unknown as Pool;
}

/** Delivers `n` messages over 8 ordering keys, as fast as capacity allows. */
function syntheticSource(n: number): Source<Body> {
  return {
    description: 'synthetic',
    async run(ctx) {
      for (let i = 0; i < n && !ctx.signal.aborted;) {
        if (ctx.freeCapacity() <= 0) {
          await ctx.waitForCapacity();
          continue;
        }
        const id = i++;
        const delivery: Delivery<Body> = {
          key: `k${id}`,
          body: { n: id },
          payload: `{"n":${id}}`,
          raw: null,
          attempt: 1,
          orderingKey: `p${id % 8}`,
          ack: () => Promise.resolve(),
          retry: () => Promise.resolve(),
          deadLetter: () => Promise.resolve(),
          release: () => Promise.resolve(),
        };
        void ctx.deliver(delivery);
      }
      await new Promise((resolve) => ctx.signal.addEventListener('abort', resolve));
    },
    close: () => Promise.resolve(),
  };
}

/** µs of wall and CPU time per message for one consumer draining `n` messages. */
async function measure(
  source: Source<Body>,
  mode: Mode,
  n: number,
  feed: () => Promise<void> = () => Promise.resolve(),
): Promise<{ wallUs: number; cpuUs: number }> {
  let done = 0;
  let finish!: () => void;
  const finished = new Promise<void>((resolve) => (finish = resolve));
  const consumer = createConsumer<Body>({
    name: 'overhead',
    source,
    pool: instantPool(),
    concurrency: 8,
    migrate: false,
    ...(mode === 'batch'
      ? {
          batch: { maxSize: 100 },
          batchHandler: async (_items, { tx }) => void (await tx.query('INSERT')),
        }
      : { handler: async (_body, { tx }) => void (await tx.query('INSERT')) }),
  });
  consumer.on('processed', () => {
    if (++done === n) finish();
  });
  const started = performance.now();
  const cpu = process.cpuUsage();
  await consumer.start();
  await feed();
  await finished;
  const wallMs = performance.now() - started;
  const used = process.cpuUsage(cpu);
  await consumer.stop();
  return { wallUs: (wallMs * 1000) / n, cpuUs: (used.user + used.system) / n };
}

async function kafkaRun(mode: Mode, n: number): Promise<{ wallUs: number; cpuUs: number }> {
  const partitions = 8;
  const perPartition = Math.ceil(n / partitions);
  const fake = new FakeConsumer();
  const source = kafkaSource<Body>({
    kafka: { consumer: () => fake, producer: () => new FakeProducer() },
    groupId: 'overhead',
    topics: ['t'],
    pipeline: mode === 'batch' ? 100 : 1,
    parse: (record) => JSON.parse(record.value?.toString() ?? '{}') as Body,
  });
  const feed = async (): Promise<void> => {
    while (fake.runConfig === undefined) await new Promise((r) => setTimeout(r, 1));
    fake.assign({ t: [...Array(partitions).keys()] });
    await Promise.all(
      [...Array(partitions).keys()].map(async (p) => {
        // The adapter may take only part of a batch (backpressure): resend from what it resolved.
        for (let from = 0; from < perPartition;) {
          const taken = await fake.batch(
            't',
            p,
            messages(from, Math.min(500, perPartition - from)),
          );
          if (taken.resolved !== undefined) from = Number(taken.resolved) + 1;
          else await new Promise((r) => setTimeout(r, 1));
        }
      }),
    );
  };
  return measure(source, mode, perPartition * partitions, feed);
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      messages: { type: 'string', default: '200000' },
      rounds: { type: 'string', default: '3' },
    },
  });
  const n = Number(values.messages);
  const rounds = Number(values.rounds);
  console.log(
    `library overhead with instant I/O: ${n} messages, median of ${rounds} rounds, Node ${process.versions.node}`,
  );
  console.log('| path | mode | µs/message wall | µs/message CPU |\n|---|---|--:|--:|');
  for (const path of ['core', 'kafka adapter + core'] as const) {
    for (const mode of ['per-message', 'batch'] as const) {
      const results = [];
      for (let r = 0; r < rounds; r++)
        results.push(
          path === 'core' ? await measure(syntheticSource(n), mode, n) : await kafkaRun(mode, n),
        );
      const wall = median(results.map((x) => x.wallUs)) ?? NaN;
      const cpu = median(results.map((x) => x.cpuUs)) ?? NaN;
      console.log(`| ${path} | ${mode} | ${wall.toFixed(1)} | ${cpu.toFixed(1)} |`);
    }
  }
}

// With every promise waiting on a count that never completes, Node would exit quietly with 0.
let completed = false;
process.on('exit', () => {
  if (!completed) {
    console.error(
      'overhead: a measurement never finished (its deliveries did not all settle as processed)',
    );
    process.exitCode = 1;
  }
});

main()
  .then(() => (completed = true))
  .catch((error: unknown) => {
    console.error(error);
    process.exitCode = 1;
  });
