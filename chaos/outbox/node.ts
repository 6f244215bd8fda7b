/**
 * One process of the outbox chaos run (chaos/outbox/run.ts), by role:
 * - `a`: service A, a consumer of the input topic whose handler, in `ctx.tx`, takes the
 *   account's next sequence number, records its own effect and enqueues an outbox row
 *   (ordering key = the account) for service B;
 * - `relay`: `createRelay` with `kafkaPublisher` to the output topic;
 * - `b`: service B, a consumer of the output topic with the default dedup key (the
 *   `eo-outbox-id` header), whose handler records (operation, account, sequence) in
 *   `ctx.tx`; the ledger's serial id is B's apply order.
 * Started by the run's Fleet (config as JSON in CHAOS_WORKER); the parent SIGKILLs it
 * at random, SIGTERM stops it cleanly.
 */
import { Kafka, logLevel } from 'kafkajs';
import pg from 'pg';
import { createConsumer, type Consumer } from 'effectively-once';
import { kafkaSource, type KafkaRecord } from 'effectively-once/kafka';
import {
  createRelay,
  enqueue,
  kafkaPublisher,
  type Publisher,
  type Relay,
} from 'effectively-once/outbox';
import { WORKER_ENV, type FromWorker, type ToWorker } from '../protocol.js';
import { outboxTables, type OutboxNodeConfig, type Operation, type Downstream } from './shared.js';
import { CHAOS_KAFKA_RETRY, CHAOS_KAFKA_SOURCE } from '../kafka-source-timings.js';
import { stderrLogger } from '../stderr-logger.js';

const config = JSON.parse(process.env[WORKER_ENV] ?? 'null') as OutboxNodeConfig | null;
if (config === null) throw new Error(`${WORKER_ENV} is not set: started by chaos/outbox/run.ts`);
const cfg: OutboxNodeConfig = config;
const tag = `[${cfg.role} ${cfg.index} pid ${process.pid}]`;
const t = outboxTables(cfg.schema);
/** Relay: SIGKILL itself after its next publish (see killAfterPublish). */
let armed = false;

const logger = stderrLogger(tag);

function send(message: FromWorker): void {
  process.send?.(message);
}

const kafka = new Kafka({
  clientId: `chaos-outbox-${cfg.role}-${cfg.index}`,
  brokers: cfg.brokers,
  logLevel: logLevel.ERROR,
  connectionTimeout: 3000,
  retry: CHAOS_KAFKA_RETRY,
});

function consumer<T>(
  pool: pg.Pool,
  name: string,
  topic: string,
  groupId: string,
  handler: (body: T, tx: pg.PoolClient, key: string) => Promise<void>,
): Consumer {
  return createConsumer<T>({
    name,
    pool,
    schema: cfg.schema,
    source: kafkaSource<T>({
      kafka,
      groupId,
      topics: [topic],
      ...CHAOS_KAFKA_SOURCE,
      // The offset-key control: a re-published record has a new offset, so a new key.
      ...(cfg.control === 'offset-key' && topic === cfg.outTopic
        ? { key: (r: KafkaRecord) => `${r.topic}/${r.partition}/${r.offset}` }
        : {}),
    }),
    concurrency: 4,
    maxAttempts: 1000,
    lockTimeoutMs: 2000,
    busyRetryDelayMs: 500,
    backoff: { initialMs: 100, maxMs: 1000 },
    handlerTimeoutMs: 30_000,
    logger,
    handler: (body, ctx) => handler(body, ctx.tx, ctx.key),
  });
}

/** Service A: its effect, the account's next sequence number and the outbox row, in one transaction. */
async function serviceA(body: Operation, tx: pg.PoolClient): Promise<void> {
  // The account row's lock is held until COMMIT, so sequence order is commit order per
  // account, and so is the outbox's insertion order (what the relay publishes by).
  const { rows } = await tx.query<{ seq: number }>(
    `INSERT INTO ${t.accounts} (account, seq) VALUES ($1, 1)
     ON CONFLICT (account) DO UPDATE SET seq = ${t.accounts}.seq + 1 RETURNING seq`,
    [body.account],
  );
  const seq = rows[0]?.seq;
  if (seq === undefined) throw new Error('no sequence number returned');
  await tx.query(`INSERT INTO ${t.aEffects} (op, account, seq, pid) VALUES ($1, $2, $3, $4)`, [
    body.op,
    body.account,
    seq,
    process.pid,
  ]);
  const downstream: Downstream = { op: body.op, account: body.account, seq };
  await enqueue(
    tx,
    {
      destination: 'service-b',
      payload: downstream,
      ...(cfg.control === 'unordered' ? {} : { orderingKey: body.account }),
    },
    { schema: cfg.schema },
  );
}

/** Service B: the downstream effect, keyed by the outbox id the relay's record carries. */
async function serviceB(body: Downstream, tx: pg.PoolClient, key: string): Promise<void> {
  await tx.query(
    `INSERT INTO ${t.bApplied} (op, account, seq, outbox_id, pid) VALUES ($1, $2, $3, $4, $5)`,
    [body.op, body.account, body.seq, key, process.pid],
  );
}

async function main(): Promise<void> {
  const pool = new pg.Pool({
    connectionString: cfg.databaseUrl,
    max: 8,
    connectionTimeoutMillis: 5000,
  });
  pool.on('error', () => undefined); // Postgres restarts on purpose
  let stopOne: () => Promise<void>;
  if (cfg.role === 'relay') {
    const publisher = kafkaPublisher({ kafka, topic: cfg.outTopic });
    // Armed by the parent: die once a batch is on the broker and before the relay marks
    // it, so another relay must publish it again after the lease (republished > 0).
    const killAfterPublish: Publisher = {
      async publish(records, signal) {
        const result = await publisher.publish(records, signal);
        if (armed) process.kill(process.pid, 'SIGKILL');
        return result;
      },
    };
    const relay: Relay = createRelay({
      pool,
      schema: cfg.schema,
      publishers: { 'service-b': killAfterPublish },
      owner: `relay-${cfg.index}-${process.pid}`,
      batchSize: 20,
      // Short, so a killed relay's claimed rows go to another relay within seconds.
      leaseMs: cfg.leaseMs,
      pollIntervalMs: 200,
      maxAttempts: 1000,
      backoff: { initialMs: 100, maxMs: 1000 },
      logger,
    });
    await relay.start();
    stopOne = async () => {
      await relay.stop();
      await publisher.close();
    };
  } else {
    const c =
      cfg.role === 'a'
        ? consumer<Operation>(pool, 'service-a', cfg.inTopic, cfg.groupA, serviceA)
        : consumer<Downstream>(pool, 'service-b', cfg.outTopic, cfg.groupB, serviceB);
    await c.start();
    stopOne = () => c.stop({ timeoutMs: 10_000 });
    void c.done.then(() => {
      if (stopping === undefined) {
        console.error(tag, 'receive loop ended unexpectedly; exiting for a restart');
        process.exit(4);
      }
    });
  }
  let stopping: Promise<void> | undefined;
  const stop = (): Promise<void> =>
    (stopping ??= (async () => {
      await stopOne();
      await pool.end().catch(() => undefined);
      process.exit(0);
    })());
  process.on('SIGTERM', () => void stop());
  process.on('SIGINT', () => void stop());
  // The parent is gone (killed): do not outlive it.
  process.on('disconnect', () => process.exit(1));
  process.on('message', (message: ToWorker) => {
    if (message.type === 'stop') void stop();
    else if (message.type === 'arm') armed = true;
  });
  send({ type: 'ready' });
}

main().catch((error: unknown) => {
  console.error(tag, 'failed:', error instanceof Error ? error.message : error);
  process.exit(3);
});
