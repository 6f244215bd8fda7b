/**
 * `npm run bench -- --outbox [--no-fsync] [--broker sqs|kafka] [--rows 5000] [--relays 2]
 *  [--batch 50] [--latency-rows 200] [--writers 8] [--order-transactions 2000]
 *  [--out .cache/runs/bench]`
 *
 * The outbox relay, measured side by side in one run against one Postgres and broker:
 * 1. DB ceiling: relays doing the same claim + mark work with a publisher that returns
 *    at once (no broker);
 * 2. broker ceiling: the same publisher sending the same rows in the same batches, with
 *    the same parallelism, straight from memory (no database);
 * 3. the relay: claim, publish, mark, end to end;
 * then commit→publish latency (COMMIT returned → the publisher's send resolved), one
 * row every 10 ms, with NOTIFY and poll-only (the default 1 s poll); then the cost of
 * enqueue's commit order (bench/outbox-order.ts). Against a durable Postgres by default
 * (bench/durability.ts), `--no-fsync` for the CPU-bound run. Writes
 * `<out>/latest-outbox-<broker>[-no-fsync].md`.
 */
import { choiceOption } from '../kit/args.js';
import { runDir } from '../kit/results.js';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { CreateQueueCommand, SQSClient } from '@aws-sdk/client-sqs';
import { Kafka, logLevel } from 'kafkajs';
import pg from 'pg';
import {
  createRelay,
  enqueue,
  migrateOutbox,
  type OutboxRecord,
  type Publisher,
} from '../src/outbox/index.js';
import { kafkaPublisher } from '../adapters/kafka/index.js';
import { sqsPublisher } from '../adapters/sqs/index.js';
import { orderCost, orderCostLines } from './outbox-order.js';
import { ensureServices, type Endpoints } from './services.js';
import {
  durabilityLine,
  durabilitySuffix,
  ensureDurability,
  type Durability,
} from './durability.js';
import { percentile } from './stats.js';

const SCHEMA = 'eo_bench_outbox';
const KEYS = 100;

interface Options {
  durability: Durability;
  broker: 'sqs' | 'kafka';
  rows: number;
  relays: number;
  batch: number;
  latencyRows: number;
  writers: number;
  orderTransactions: number;
  out: string;
}

function options(argv: string[]): Options {
  const { values } = parseArgs({
    args: argv.filter((a) => a !== '--outbox'),
    options: {
      'no-fsync': { type: 'boolean', default: false },
      broker: { type: 'string', default: 'sqs' },
      rows: { type: 'string', default: '5000' },
      relays: { type: 'string', default: '2' },
      batch: { type: 'string', default: '50' },
      'latency-rows': { type: 'string', default: '200' },
      writers: { type: 'string', default: '8' },
      'order-transactions': { type: 'string', default: '2000' },
      out: { type: 'string', default: runDir('bench') },
    },
  });
  const broker = choiceOption('broker', values.broker, ['sqs', 'kafka'] as const, 'sqs');
  return {
    durability: values['no-fsync'] ? 'no-fsync' : 'durable',
    broker,
    rows: Number(values.rows),
    relays: Number(values.relays),
    batch: Number(values.batch),
    latencyRows: Number(values['latency-rows']),
    writers: Number(values.writers),
    orderTransactions: Number(values['order-transactions']),
    out: values.out,
  };
}

/** A fresh publisher to a fresh queue or topic, and a way to release it. */
async function brokerPublisher(
  o: Options,
  endpoints: Endpoints,
): Promise<{ publisher: Publisher; close(): Promise<void> }> {
  const name = `outbox-bench-${Date.now()}`;
  if (o.broker === 'sqs') {
    const client = new SQSClient({
      region: 'us-east-1',
      endpoint: endpoints.sqsEndpoint,
      credentials: { accessKeyId: 'x', secretAccessKey: 'x' },
    });
    const { QueueUrl } = await client.send(new CreateQueueCommand({ QueueName: name }));
    return {
      publisher: sqsPublisher({ client, queueUrl: QueueUrl! }),
      close: async () => client.destroy(),
    };
  }
  const kafka = new Kafka({
    brokers: (endpoints.kafkaBrokers ?? '').split(','),
    logLevel: logLevel.NOTHING,
  });
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({ topics: [{ topic: name, numPartitions: 4 }], waitForLeaders: true });
  await admin.disconnect();
  const publisher = kafkaPublisher({ kafka, topic: name });
  return { publisher, close: () => publisher.close() };
}

async function fill(pool: pg.Pool, rows: number): Promise<void> {
  await pool.query(`TRUNCATE ${SCHEMA}.eo_outbox`);
  const client = await pool.connect();
  try {
    for (let i = 0; i < rows; i += 500) {
      await client.query('BEGIN');
      for (let j = i; j < Math.min(rows, i + 500); j++) {
        await enqueue(
          client,
          {
            destination: 'd',
            orderingKey: `k${j % KEYS}`,
            payload: { n: j, pad: 'x'.repeat(200) },
          },
          { schema: SCHEMA },
        );
      }
      await client.query('COMMIT');
    }
  } finally {
    client.release();
  }
}

/** Rows/s of `relays` relays publishing every row of the table through `publisher`. */
async function relayRate(pool: pg.Pool, o: Options, publisher: Publisher): Promise<number> {
  await fill(pool, o.rows);
  const relays = Array.from({ length: o.relays }, () =>
    createRelay({ pool, schema: SCHEMA, publishers: { d: publisher }, batchSize: o.batch }),
  );
  let published = 0;
  let done: () => void = () => undefined;
  const all = new Promise<void>((resolve) => (done = resolve));
  for (const r of relays)
    r.on('batch', (b) => {
      published += b.published;
      if (published >= o.rows) done();
    });
  const started = performance.now();
  await Promise.all(relays.map((r) => r.start()));
  await all;
  const seconds = (performance.now() - started) / 1000;
  await Promise.all(relays.map((r) => r.stop()));
  return o.rows / seconds;
}

/** Rows/s of the publisher alone: the same batches, the same parallelism, no database. */
async function brokerRate(o: Options, publisher: Publisher): Promise<number> {
  const records: OutboxRecord[] = Array.from({ length: o.rows }, (_, n) => ({
    id: `00000000-0000-7000-8000-${String(n).padStart(12, '0')}`,
    destination: 'd',
    orderingKey: `k${n % KEYS}`,
    payload: Buffer.from(JSON.stringify({ n, pad: 'x'.repeat(200) })),
    contentType: 'application/json',
    headers: {},
    attempts: 1,
    createdAt: new Date(),
  }));
  const batches: OutboxRecord[][] = [];
  for (let i = 0; i < records.length; i += o.batch) batches.push(records.slice(i, i + o.batch));
  const signal = new AbortController().signal;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: o.relays }, async () => {
      for (let batch = batches.shift(); batch !== undefined; batch = batches.shift()) {
        const failures = await publisher.publish(batch, signal);
        if (failures instanceof Map && failures.size > 0)
          throw new Error(`broker refused ${failures.size} records`);
      }
    }),
  );
  return o.rows / ((performance.now() - started) / 1000);
}

/** Commit→publish latencies in ms, one row committed every 10 ms. */
async function latency(
  pool: pg.Pool,
  o: Options,
  inner: Publisher,
  listen: boolean,
): Promise<number[]> {
  await pool.query(`TRUNCATE ${SCHEMA}.eo_outbox`);
  const committed = new Map<string, number>();
  const sent = new Map<string, number>();
  const publisher: Publisher = {
    async publish(records, signal) {
      const result = await inner.publish(records, signal);
      const now = performance.now();
      for (const r of records) sent.set(r.id, now);
      return result;
    },
  };
  const relay = createRelay({
    pool,
    schema: SCHEMA,
    publishers: { d: publisher },
    batchSize: o.batch,
    listen,
  });
  await relay.start();
  const client = await pool.connect();
  try {
    for (let n = 0; n < o.latencyRows; n++) {
      await client.query('BEGIN');
      const id = await enqueue(client, { destination: 'd', payload: { n } }, { schema: SCHEMA });
      await client.query('COMMIT');
      committed.set(id, performance.now());
      await new Promise((r) => setTimeout(r, 10));
    }
  } finally {
    client.release();
  }
  while (sent.size < o.latencyRows) await new Promise((r) => setTimeout(r, 20));
  await relay.stop();
  return [...committed].map(([id, at]) => sent.get(id)! - at).sort((a, b) => a - b);
}

const pct = (samples: number[], p: number): number => percentile(samples, p / 100) ?? NaN;

/** Runs the outbox bench and writes its table. */
export async function runOutboxBench(argv: string[]): Promise<void> {
  const o = options(argv);
  const services = await ensureServices(o.broker);
  const durability = await ensureDurability(
    services.endpoints.databaseUrl,
    o.durability,
    services.started.includes('postgres'),
  );
  const pool = new pg.Pool({
    connectionString: services.endpoints.databaseUrl,
    max: Math.max(4 * o.relays + 4, o.writers + 2),
  });
  try {
    await pool.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
    await migrateOutbox(pool, { schema: SCHEMA });
    const broker = await brokerPublisher(o, services.endpoints);
    const nothing: Publisher = { publish: async () => undefined };
    // Interleaved, each measured twice, so a slow moment of the machine hits both sides.
    const db: number[] = [];
    const ceiling: number[] = [];
    const relay: number[] = [];
    for (let round = 0; round < 2; round++) {
      db.push(await relayRate(pool, o, nothing));
      ceiling.push(await brokerRate(o, broker.publisher));
      relay.push(await relayRate(pool, o, broker.publisher));
    }
    const notify = await latency(pool, o, broker.publisher, true);
    const poll = await latency(pool, o, broker.publisher, false);
    await broker.close();
    const order = {
      schema: SCHEMA,
      writers: o.writers,
      transactions: o.orderTransactions,
      rounds: 2,
    };
    const orderRuns = await orderCost(pool, order);

    const best = (xs: number[]): number => Math.max(...xs);
    const floor = Math.min(best(db), best(ceiling));
    const ratio = best(relay) / floor;
    const fmt = (n: number): string => Math.round(n).toLocaleString('en-US');
    const ms = (n: number): string => n.toFixed(1);
    const lines = [
      `# Outbox relay bench (${o.broker}, ${o.durability})`,
      '',
      `\`npm run bench -- ${argv.join(' ')}\`, ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC,`,
      `${os.cpus().length}× ${os.cpus()[0]?.model.trim() ?? 'cpu'}, load ${os.loadavg()[0]?.toFixed(2)}.`,
      `${o.rows} rows over ${KEYS} ordering keys, ${o.relays} relays, batch ${o.batch}; best of 2 interleaved rounds.`,
      '',
      durabilityLine(durability),
      '',
      '| measure | rows/s (each round) | best |',
      '| --- | --- | --- |',
      `| DB ceiling: claim + mark, no-op publisher | ${db.map(fmt).join(', ')} | ${fmt(best(db))} |`,
      `| broker ceiling: publisher alone, no DB | ${ceiling.map(fmt).join(', ')} | ${fmt(best(ceiling))} |`,
      `| relay: claim, publish, mark | ${relay.map(fmt).join(', ')} | ${fmt(best(relay))} |`,
      '',
      `Relay / min(DB, broker) = ${ratio.toFixed(2)} (target ≥ 0.5): ${ratio >= 0.5 ? 'met' : 'NOT met'}.`,
      '',
      `| commit → publish (${o.latencyRows} rows, one per 10 ms) | p50 ms | p99 ms | max ms |`,
      '| --- | --- | --- | --- |',
      `| NOTIFY (poll 1 s as fallback) | ${ms(pct(notify, 50))} | ${ms(pct(notify, 99))} | ${ms(notify.at(-1)!)} |`,
      `| poll only (1 s) | ${ms(pct(poll, 50))} | ${ms(pct(poll, 99))} | ${ms(poll.at(-1)!)} |`,
      '',
      `p50 with NOTIFY < 20 ms (target): ${pct(notify, 50) < 20 ? 'met' : 'NOT met'}.`,
      '',
      ...orderCostLines(orderRuns, order),
    ];
    const text = lines.join('\n');
    console.log(text);
    fs.mkdirSync(o.out, { recursive: true });
    fs.writeFileSync(
      path.join(o.out, `latest-outbox-${o.broker}${durabilitySuffix(o.durability)}.md`),
      text,
    );
    await pool.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
  } finally {
    await pool.end();
    await services.stop();
  }
}
