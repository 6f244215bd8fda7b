/**
 * A relay process of the outbox run: `createRelay` over the run's outbox table for one
 * destination set (`DESTINATIONS[index % 2]`), with the publisher of the run's output
 * (Kafka topic, SQS FIFO queue, or service B's HTTP receivers). Two wrappers around the
 * publisher: the poison gate (a poison row fails with a non-retryable error, so it parks,
 * until the run opens the gate) and the armed kill (die right after a publish, before
 * the marks).
 */
import { chaosReplicaSafe } from '../failover/replica-safe.js';
import type pg from 'pg';
import {
  createRelay,
  httpPublisher,
  PublishError,
  type OutboxRecord,
  type Publisher,
  type Relay,
} from 'effectively-once/outbox';
import { kafkaPublisher } from 'effectively-once/kafka';
import { sqsPublisher } from 'effectively-once/sqs';
import type { Logger } from 'effectively-once';
import { chaosKafka, chaosSqs } from './consumers.js';
import {
  DESTINATIONS,
  POISON_ERROR,
  outboxTables,
  type Downstream,
  type OutboxNodeConfig,
} from './shared.js';

/** Starts the relay; the returned stop() stops it and closes its publisher. */
export async function startRelay(
  cfg: OutboxNodeConfig,
  pool: pg.Pool,
  logger: Logger,
  armed: () => boolean,
): Promise<() => Promise<void>> {
  const destination = DESTINATIONS[cfg.index % DESTINATIONS.length]!;
  const output = outputPublisher(cfg);
  const publisher = output.publisher;
  const gate = poisonGate(cfg, pool);
  const wrapped: Publisher = {
    async publish(records, signal) {
      const failures = new Map<string, unknown>();
      const poison = await gate.refused(records);
      for (const id of poison)
        failures.set(id, new PublishError(destination, POISON_ERROR, { retryable: false }));
      const rest = records.filter((r) => !poison.has(r.id));
      if (rest.length > 0) {
        const result = await publisher.publish(rest, signal);
        if (result instanceof Map)
          for (const [id, error] of result as ReadonlyMap<string, unknown>) failures.set(id, error);
      }
      // Armed by the parent: die once a batch is out and before the relay marks it, so
      // another relay must publish it again after the lease.
      if (armed() && rest.length > 0) process.kill(process.pid, 'SIGKILL');
      return failures;
    },
  };
  const relay: Relay = createRelay({
    pool,
    schema: cfg.schema,
    publishers: { [destination]: wrapped },
    owner: `relay-${cfg.index}-${process.pid}`,
    batchSize: 20,
    replicaSafe: chaosReplicaSafe(),
    // Short, so a killed relay's claimed rows go to another relay within seconds.
    leaseMs: cfg.leaseMs,
    pollIntervalMs: 200,
    maxAttempts: 1000,
    backoff: { initialMs: 100, maxMs: 1000 },
    logger,
  });
  await relay.start();
  return async () => {
    await relay.stop();
    await output.close();
  };
}

function outputPublisher(cfg: OutboxNodeConfig): {
  publisher: Publisher;
  close(): Promise<void>;
} {
  const output = cfg.output;
  if (output.kind === 'kafka') {
    const publisher = kafkaPublisher({
      kafka: chaosKafka(cfg, output.brokers),
      topic: output.topic,
    });
    return { publisher, close: () => publisher.close() };
  }
  if (output.kind === 'sqs') {
    const client = chaosSqs(output.endpoint);
    return {
      publisher: sqsPublisher({ client, queueUrl: output.queueUrl }),
      close: async () => client.destroy(),
    };
  }
  const ports = output.ports;
  return {
    // An account's rows always go to the same receiver (the unordered control's rows,
    // without an account key, spread by id).
    publisher: httpPublisher({
      url: (record) => `http://127.0.0.1:${ports[spread(record, ports.length)]}/apply`,
    }),
    close: async () => undefined,
  };
}

function spread(record: OutboxRecord, n: number): number {
  const key = record.orderingKey ?? record.id;
  let h = 0;
  for (let i = 0; i < key.length; i++) h = (h * 31 + key.charCodeAt(i)) >>> 0;
  return h % n;
}

/** Which of a batch's rows are poison while the gate is closed (one query, only when a batch has any). */
function poisonGate(cfg: OutboxNodeConfig, pool: pg.Pool) {
  const t = outboxTables(cfg.schema);
  return {
    async refused(records: readonly OutboxRecord[]): Promise<Set<string>> {
      const poison = records.filter(
        (r) => (JSON.parse(r.payload.toString('utf8')) as Downstream).poison === true,
      );
      if (poison.length === 0) return new Set();
      // Refused ones are recorded (for the run's `parked` count) in the same statement.
      const { rows } = await pool.query<{ fixed: boolean }>(
        `WITH gate AS (SELECT fixed FROM ${t.poisonGate}),
              refused AS (INSERT INTO ${t.poisonRefused} (id)
                          SELECT unnest($1::uuid[]) WHERE NOT (SELECT fixed FROM gate)
                          ON CONFLICT DO NOTHING)
         SELECT fixed FROM gate`,
        [poison.map((r) => r.id)],
      );
      if (rows[0]?.fixed === true) return new Set();
      return new Set(poison.map((r) => r.id));
    },
  };
}
