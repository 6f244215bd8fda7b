/**
 * One chaos worker process: `createConsumer` over `sqsSource` / `kafkaSource` /
 * `rabbitmqSource`, exactly
 * as an application would use the public API. Its handler increments the key's counter
 * and appends a ledger row through `ctx.tx`; poison bodies write the same and then
 * throw, so only a rollback keeps them out; a body carrying a handler fault then
 * commits that fault (fault-effects.ts). The parent arms fault points over IPC and
 * SIGKILLs the process at random; SIGTERM or a `stop` message stops it cleanly.
 */
import { chaosReplicaSafe } from '../failover/replica-safe.js';
import { SQSClient } from '@aws-sdk/client-sqs';
import { Kafka, logLevel } from 'kafkajs';
import pg from 'pg';
import {
  createConsumer,
  type BatchContext,
  type BatchItem,
  type Consumer,
  type ConsumerOptions,
  type HandlerContext,
  type Source,
} from 'effectively-once';
import { kafkaRecordOf, kafkaSource } from 'effectively-once/kafka';
import { sqsSource } from 'effectively-once/sqs';
import { rabbitmqSource } from 'effectively-once/rabbitmq';
import { tables, type ChaosTables } from './db.js';
import { CHAOS_KAFKA_RETRY, CHAOS_KAFKA_SOURCE } from './kafka-source-timings.js';
import { HandlerFaults, type FloatingChain } from './fault-effects.js';
import { openDataLayer, type OpenedLayer } from '../../kit/data-layers/index.js';
import { applyThroughLayer, layerFaultTx, type LedgerItem } from './layer-effects.js';
import { Faults, armKafkaCommits, armRabbitmqAcks, armSqsDeletes } from './faults.js';
import type { ChaosBody } from './plan.js';
import { IDEMPOTENCY_HEADER } from './broker-api.js';
import { WORKER_ENV, type FromWorker, type IsolationLevel, type WorkerConfig } from './protocol.js';
import { stderrLogger } from '../../kit/stderr-logger.js';
import { serveFleet } from './fleet-child.js';
import { lambdaHost } from './lambda-host.js';

const config = JSON.parse(process.env[WORKER_ENV] ?? 'null') as WorkerConfig | null;
if (config === null)
  throw new Error(`${WORKER_ENV} is not set: this file is started by chaos/main.ts`);
const cfg: WorkerConfig = config;
const faults = new Faults();

/** An item the handler applies: its key, its attempt and where it came from. */
interface Applied {
  key: string;
  attempt: number;
  delivery: HandlerContext<unknown>['delivery'];
}

/** `ctx.tx` or the pool (the doubles control). */
type Queryable = Pick<pg.Pool, 'query'>;
const tag = `[worker ${cfg.index} pid ${process.pid}]`;

const logger = stderrLogger(tag);

function send(message: FromWorker): void {
  process.send?.(message);
}

/** Closes what the worker's source runs on and does not own (the RabbitMQ connection). */
let closeBroker: () => Promise<void> = async () => undefined;

async function source(pool: pg.Pool): Promise<Source<ChaosBody>> {
  const b = cfg.broker;
  if (b.kind === 'rabbitmq') {
    const amqp = await import('amqplib');
    // A recovering connection of the worker's own: the source reopens its channels on it
    // after the broker restarts, and the fault point wraps their acks.
    const connection = await amqp.connect(b.url, {
      recovery: { initialDelay: 200, maxDelay: 2000, maxRetries: Infinity, waitForConnect: false },
    });
    connection.on('error', () => undefined);
    closeBroker = () => connection.close().catch(() => undefined);
    return rabbitmqSource<ChaosBody>({
      connection: armRabbitmqAcks(connection, faults),
      queue: b.queue,
      key: IDEMPOTENCY_HEADER,
      prefetch: cfg.concurrency,
      deadLetterExchange: b.deadLetterExchange,
      reconnectBackoff: { initialMs: 200, maxMs: 2000 },
    });
  }
  if (b.kind === 'sqs') {
    const client = new SQSClient({
      region: 'us-east-1',
      endpoint: b.endpoint,
      credentials: { accessKeyId: 'chaos', secretAccessKey: 'chaos' },
    });
    armSqsDeletes(client, faults);
    return sqsSource<ChaosBody>({
      client,
      queueUrl: b.queueUrl,
      key: 'Idempotency-Key',
      deadLetterQueueUrl: b.deadLetterQueueUrl,
      // Short, so a killed worker's messages come back quickly; the heartbeat keeps live ones.
      visibilityTimeout: 5,
      heartbeat: true,
      waitTimeSeconds: 2,
    });
  }
  const clientId = `chaos-worker-${cfg.index}`;
  // @platformatic/kafka is imported only when chosen: it needs Node >= 22.22.
  const kafka =
    cfg.kafkaClient === 'platformatic'
      ? (await import('./platformatic-kafka.js')).platformaticKafka(clientId, b.brokers)
      : new Kafka({
          clientId,
          brokers: b.brokers,
          logLevel: logLevel.ERROR,
          connectionTimeout: 3000,
          retry: CHAOS_KAFKA_RETRY,
        });
  return kafkaSource<ChaosBody>({
    kafka: armKafkaCommits(kafka, faults),
    groupId: b.groupId,
    topics: [b.topic],
    ...CHAOS_KAFKA_SOURCE,
    keyConcurrency: cfg.keyConcurrency ?? CHAOS_KAFKA_SOURCE.keyConcurrency,
    // Batch mode gets whole runs of a partition's records, as the README advises.
    pipeline: cfg.pipeline ?? cfg.batch ?? 1,
    ...(cfg.offsets === 'postgres' ? { offsets: 'postgres', pool, offsetsSchema: cfg.schema } : {}),
  });
}

/** A startup option: every transaction of the pool's connections, the claim's included, runs at it. */
function isolationOption(level: IsolationLevel | undefined): { options?: string } {
  // Spaces inside a value are escaped with a backslash in the startup `options`.
  return level === undefined
    ? {}
    : { options: `-c default_transaction_isolation=${level.replace(' ', '\\ ')}` };
}

/** The consumer's failed / dead-lettered events by error code, reported to the parent every second. */
function reportEvents(consumer: Consumer): () => void {
  let failed: Record<string, number> = {};
  let deadLettered: Record<string, number> = {};
  consumer.on('failed', (e) => (failed[e.error.code] = (failed[e.error.code] ?? 0) + 1));
  consumer.on('dead-lettered', (e) => {
    deadLettered[e.error.code] = (deadLettered[e.error.code] ?? 0) + 1;
    // A logical key must never be dead-lettered: what the library made of it is the evidence.
    if (e.key?.startsWith('m-') === true)
      console.error(
        tag,
        `dead-lettered logical key ${e.key} at attempt ${e.attempt}: ${e.error.code} ${causeChain(e.error)}`,
      );
  });
  const flush = (): void => {
    if (Object.keys(failed).length + Object.keys(deadLettered).length === 0) return;
    send({ type: 'events', failed, deadLettered });
    failed = {};
    deadLettered = {};
  };
  setInterval(flush, 1000).unref();
  return flush;
}

/** An error and its causes, by class and message, on one line. */
function causeChain(error: unknown): string {
  const parts: string[] = [];
  for (let e = error, depth = 0; e !== undefined && e !== null && depth < 5; depth++) {
    const err = e as {
      constructor?: { name?: string };
      message?: unknown;
      code?: unknown;
      cause?: unknown;
    };
    const message = typeof err.message === 'string' ? err.message : JSON.stringify(e);
    const code = typeof err.code === 'string' ? `(${err.code})` : '';
    parts.push(`${err.constructor?.name ?? typeof e}${code}: ${message.split('\n').join(' ')}`);
    e = err.cause;
  }
  return parts.join(' <- ');
}

async function main(): Promise<void> {
  const pool = new pg.Pool({
    connectionString: cfg.databaseUrl,
    max: cfg.concurrency + 2,
    connectionTimeoutMillis: 5000,
    ...isolationOption(cfg.isolation),
  });
  pool.on('error', () => undefined); // Postgres restarts on purpose
  const t = tables(cfg.schema);
  const { counters, ledger } = t;
  const handlerFaults = await HandlerFaults.create(cfg.databaseUrl, t, cfg.index, cfg.maxAttempts);
  const apply = async (db: Queryable, items: ReadonlyArray<Applied>): Promise<void> => {
    const keys = items.map((i) => i.key);
    // Where each record came from (Kafka), for the order check; null for SQS.
    const records = items.map((i) =>
      cfg.broker.kind === 'kafka' ? kafkaRecordOf(i.delivery) : undefined,
    );
    // A key twice in one statement would fail ("cannot affect row a second time"): a dedup bug would show.
    await db.query(
      `INSERT INTO ${counters} (key, n) SELECT k, 1 FROM unnest($1::text[]) AS k ON CONFLICT (key) DO UPDATE SET n = ${counters}.n + 1`,
      [keys],
    );
    await db.query(
      `INSERT INTO ${ledger} (key, worker, pid, attempt, part, kafka_offset)
       SELECT k, $2, $3, a, p, o FROM unnest($1::text[], $4::int[], $5::int[], $6::bigint[]) AS t(k, a, p, o)`,
      [
        keys,
        cfg.index,
        process.pid,
        items.map((i) => i.attempt),
        records.map((r) => r?.partition ?? null),
        records.map((r) => r?.offset ?? null),
      ],
    );
  };
  const common = {
    name: cfg.consumerName,
    pool,
    schema: cfg.schema,
    concurrency: cfg.concurrency,
    maxAttempts: cfg.maxAttempts,
    lockTimeoutMs: 2000,
    busyRetryDelayMs: 500,
    replicaSafe: chaosReplicaSafe(),
    backoff: { initialMs: 100, maxMs: 1000 },
    handlerTimeoutMs: 30_000,
    logger,
  };
  const data =
    cfg.dataLayer === undefined
      ? undefined
      : await openDataLayer(cfg.dataLayer, cfg.databaseUrl, cfg.concurrency + 2);
  // One message's effect (a poison body throws after writing, a fault commits after it).
  const perMessage = async (body: ChaosBody, ctx: HandlerContext<unknown>): Promise<void> => {
    if (cfg.control === 'losses') await ctx.delivery.ack();
    // The doubles control writes with autocommit, outside the claim's transaction.
    await apply(cfg.control === 'doubles' ? pool : ctx.tx, [
      { key: ctx.key, attempt: ctx.attempt, delivery: ctx.delivery },
    ]);
    if (body.poison === true) throw new Error(`poison message ${ctx.key}`);
    const floating =
      body.fault === undefined
        ? undefined
        : await handlerFaults.commit(ctx.tx, ctx.key, ctx.attempt, body.fault);
    faults.at('in-handler');
    floating?.();
  };
  const b = cfg.broker;
  const host =
    cfg.lambda === true && b.kind === 'sqs'
      ? lambdaHost({
          common,
          endpoint: b.endpoint,
          queueUrl: b.queueUrl,
          faults,
          handler: perMessage,
        })
      : undefined;
  const consumer: Consumer =
    host !== undefined
      ? host.consumer
      : data !== undefined
        ? layerConsumer(
            { ...common, source: await source(pool) },
            data,
            t,
            handlerFaults,
            (items) => apply(pool, items),
          )
        : createConsumer<ChaosBody>({
            ...common,
            source: await source(pool),
            ...(cfg.batch === undefined
              ? { handler: perMessage }
              : {
                  batch: { maxSize: cfg.batch, maxWaitMs: 20 },
                  batchHandler: async (
                    items: ReadonlyArray<BatchItem<ChaosBody>>,
                    ctx: BatchContext,
                  ) => {
                    if (cfg.control === 'losses')
                      await Promise.all(items.map((i) => i.delivery.ack()));
                    await apply(cfg.control === 'doubles' ? pool : ctx.tx, items);
                    const poison = items.find((i) => i.message.poison === true);
                    if (poison !== undefined) throw new Error(`poison message ${poison.key}`);
                    const floating: FloatingChain[] = [];
                    for (const item of items) {
                      const fault = item.message.fault;
                      if (fault === undefined) continue;
                      const chain = await handlerFaults.commit(
                        ctx.tx,
                        item.key,
                        item.attempt,
                        fault,
                      );
                      if (chain !== undefined) floating.push(chain);
                    }
                    faults.at('in-handler');
                    for (const chain of floating) chain();
                  },
                }),
          });
  // Emitted after COMMIT and before the ack (delete / offset) is even queued.
  consumer.on('processed', () => faults.at('after-commit'));
  const flushEvents = reportEvents(consumer);

  const fleet = serveFleet(
    async () => {
      await (host !== undefined ? host.stop() : consumer.stop({ timeoutMs: 10_000 }));
      await closeBroker();
      flushEvents();
      await handlerFaults.close();
      await data?.close().catch(() => undefined);
      await pool.end().catch(() => undefined);
    },
    (point) => {
      faults.arm(point);
      send({ type: 'armed', point });
    },
  );

  await (host !== undefined ? host.start() : consumer.start());
  send({ type: 'ready' });
  await consumer.done;
  if (!fleet.stopping()) {
    // The receive loop ended on its own (e.g. kafkajs gave up during a broker outage).
    console.error(tag, 'receive loop ended unexpectedly; exiting for a restart');
    process.exit(4);
  }
}

/** Where a delivery came from, for the ledger: the Kafka record's partition and offset, else none. */
function ledgerItem(
  key: string,
  attempt: number,
  delivery: HandlerContext<unknown>['delivery'],
): LedgerItem {
  const record = cfg.broker.kind === 'kafka' ? kafkaRecordOf(delivery) : undefined;
  return {
    key,
    attempt,
    part: record?.partition ?? null,
    offset: record === undefined ? null : String(record.offset),
  };
}

/**
 * The consumer with a data layer (`--data-layer`): `ctx.tx` is the layer's own
 * transaction object, the effect and the handler faults go through the layer's raw
 * call on it (layer-effects.ts); everything else is the pg handler's (the controls
 * included: the doubles control writes through the pool, outside the layer).
 */
function layerConsumer(
  common: Omit<ConsumerOptions<ChaosBody, unknown>, 'handler' | 'batchHandler' | 'dataLayer'>,
  data: OpenedLayer,
  t: ChaosTables,
  handlerFaults: HandlerFaults,
  /** The doubles control's effect: the pg handler's, through the pool (autocommit). */
  applyWithPool: (items: readonly Applied[]) => Promise<void>,
): Consumer {
  const apply = (tx: unknown, items: readonly Applied[]): Promise<void> =>
    cfg.control === 'doubles'
      ? applyWithPool(items)
      : applyThroughLayer(
          data,
          tx,
          t,
          cfg.index,
          items.map((i) => ledgerItem(i.key, i.attempt, i.delivery)),
        );
  return createConsumer<ChaosBody, unknown>({
    ...common,
    dataLayer: data.layer,
    ...(cfg.isolation === undefined ? {} : { isolationLevel: cfg.isolation }),
    ...(cfg.batch === undefined
      ? {
          handler: async (body: ChaosBody, ctx: HandlerContext<ChaosBody, unknown>) => {
            if (cfg.control === 'losses') await ctx.delivery.ack();
            await apply(ctx.tx, [{ key: ctx.key, attempt: ctx.attempt, delivery: ctx.delivery }]);
            if (body.poison === true) throw new Error(`poison message ${ctx.key}`);
            const floating =
              body.fault === undefined
                ? undefined
                : await handlerFaults.commit(
                    layerFaultTx(data, ctx.tx),
                    ctx.key,
                    ctx.attempt,
                    body.fault,
                  );
            faults.at('in-handler');
            floating?.();
          },
        }
      : {
          batch: { maxSize: cfg.batch, maxWaitMs: 20 },
          batchHandler: async (
            items: ReadonlyArray<BatchItem<ChaosBody>>,
            ctx: BatchContext<unknown>,
          ) => {
            if (cfg.control === 'losses') await Promise.all(items.map((i) => i.delivery.ack()));
            await apply(ctx.tx, items);
            const poison = items.find((i) => i.message.poison === true);
            if (poison !== undefined) throw new Error(`poison message ${poison.key}`);
            const floating: FloatingChain[] = [];
            for (const item of items) {
              const fault = item.message.fault;
              if (fault === undefined) continue;
              const chain = await handlerFaults.commit(
                layerFaultTx(data, ctx.tx),
                item.key,
                item.attempt,
                fault,
              );
              if (chain !== undefined) floating.push(chain);
            }
            faults.at('in-handler');
            for (const chain of floating) chain();
          },
        }),
  });
}

main().catch((error: unknown) => {
  console.error(tag, 'failed:', error instanceof Error ? error.message : error);
  process.exit(3);
});
