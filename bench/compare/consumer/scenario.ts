import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import type pg from 'pg';
import { Supervised } from '../supervisor.js';
import type { Channel } from './channel.js';
import { CONSUMER_LABELS, type ConsumerContender } from './contenders.js';
import { kafkaChannel } from './kafka-channel.js';
import { CONSUMER_TABLES, type PaymentMessage } from './payments.js';
import { sqsChannel } from './sqs-channel.js';

const WORKER = fileURLToPath(new URL('./worker.ts', import.meta.url));

/**
 * How long the parent waits for one message to be settled (deleted, offset committed)
 * before it sends the next anyway: a killed SQS message needs the visibility timeout,
 * a killed Kafka member its session to expire.
 */
export const SETTLE_MS = 20_000;

/** Doubles and losses among one kind of message. */
export interface ConsumerTally {
  messages: number;
  /** Payments applied more than once. */
  doubles: number;
  /** Payments never applied. */
  lost: number;
}

export interface ConsumerResult {
  contender: ConsumerContender;
  /** Kills that happened where they were armed (after the payment's commit, before the ack). */
  kills: number;
  killed: ConsumerTally;
  plain: ConsumerTally;
  /** Messages still on the queue / offsets not committed at the end. */
  backlog: number;
  seconds: number;
}

export interface ConsumerScenarioOptions {
  pool: pg.Pool;
  databaseUrl: string;
  /** Needed by the SQS contenders. */
  sqsEndpoint?: string;
  /** Needed by the Kafka contenders. */
  kafkaBrokers?: string[];
  runId: string;
  messages: number;
  log: (line: string) => void;
}

/** Every 5th message (from the 2nd) is armed: the worker dies after its commit, before its ack. */
export function armedAt(index: number): boolean {
  return index % 5 === 1;
}

/**
 * The whole scenario for one contender, in a schema and on a queue or topic of its
 * own: `messages` payments sent one at a time, each waited for until it is settled; a
 * fifth of them kill the worker between the payment's commit and the delete / offset
 * commit, and the worker is restarted, as a process manager would.
 */
export async function runConsumerContender(
  contender: ConsumerContender,
  options: ConsumerScenarioOptions,
): Promise<ConsumerResult> {
  const started = Date.now();
  const slug = `compare_${options.runId}_${contender.replace(/[^a-z0-9]+/gi, '_').toLowerCase()}`;
  const { pool, log } = options;
  await pool.query(`CREATE SCHEMA ${slug}`);
  await pool.query(`SET search_path = ${slug}; ${CONSUMER_TABLES}; RESET search_path`);
  const channel = await openChannel(contender, slug.replace(/_/g, '-'), options);
  const keys: { key: string; armed: boolean }[] = [];
  let backlog = 0;
  let kills = 0;
  try {
    const worker = await Supervised.start({
      databaseUrl: options.databaseUrl,
      schema: slug,
      entry: WORKER,
      env: { COMPARE_CONTENDER: contender, COMPARE_CHANNEL: JSON.stringify(channel.env) },
    });
    try {
      for (let i = 0; i < options.messages; i++) {
        const key = `${contender}/m${i}`;
        const armed = armedAt(i);
        const body: PaymentMessage = { key, amountCents: 1999 };
        await channel.send(key, JSON.stringify(body), armed);
        keys.push({ key, armed });
        if (armed) await worker.restartAfterKill();
        if (!(await settled(channel, SETTLE_MS))) log(`${contender}: ${key} not settled in time`);
        if ((i + 1) % 20 === 0) log(`${contender}: ${i + 1}/${options.messages} messages`);
      }
      backlog = await channel.backlog();
    } finally {
      kills = worker.kills;
      await worker.stop();
    }
    const applied = await appliedByKey(pool, slug);
    return {
      contender,
      kills,
      killed: tally(
        keys.filter((k) => k.armed),
        applied,
      ),
      plain: tally(
        keys.filter((k) => !k.armed),
        applied,
      ),
      backlog,
      seconds: Math.round((Date.now() - started) / 1000),
    };
  } finally {
    await channel.close().catch(() => undefined);
    await pool.query(`DROP SCHEMA ${slug} CASCADE`);
  }
}

function openChannel(
  contender: ConsumerContender,
  name: string,
  options: ConsumerScenarioOptions,
): Promise<Channel> {
  if (CONSUMER_LABELS[contender].broker === 'sqs') {
    if (options.sqsEndpoint === undefined) throw new Error(`${contender} needs an SQS endpoint`);
    return sqsChannel(options.sqsEndpoint, name);
  }
  if (options.kafkaBrokers === undefined) throw new Error(`${contender} needs Kafka brokers`);
  return kafkaChannel(options.kafkaBrokers, name);
}

/** Polls until nothing is left to settle, or `ms` passed; true when settled. */
async function settled(channel: Channel, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while ((await channel.backlog()) > 0) {
    if (Date.now() > deadline) return false;
    await sleep(50);
  }
  return true;
}

async function appliedByKey(pool: pg.Pool, schema: string): Promise<Map<string, number>> {
  const { rows } = await pool.query<{ key: string; n: number }>(
    `SELECT payment_key AS key, count(*)::int AS n FROM ${schema}.payments GROUP BY payment_key`,
  );
  return new Map(rows.map((r) => [r.key, r.n]));
}

function tally(keys: { key: string }[], applied: Map<string, number>): ConsumerTally {
  const n = (k: { key: string }): number => applied.get(k.key) ?? 0;
  return {
    messages: keys.length,
    doubles: keys.filter((k) => n(k) > 1).length,
    lost: keys.filter((k) => n(k) === 0).length,
  };
}
