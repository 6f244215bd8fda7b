import { refuseRenamed } from '../../src/option-checks.js';
import { createConsumer } from '../../src/consumer/consumer.js';
import type { Consumer } from '../../src/consumer/types.js';
import { ConfigurationError, ShutdownError } from '../../src/errors.js';
import type { ConsumerOptions } from '../../src/consumer/options.js';
import { PushSource } from '../../src/consumer/push-source.js';
import type { Delivery, HandlerContext } from '../../src/types.js';
import type { KafkaMessageLike, KafkaProducerLike } from './client.js';
import { DeadLetterPublisher } from './dead-letter.js';
import { heartbeatWhile } from './heartbeat.js';
import { kafkaKeyOption, recordKey, type KafkaKey } from './keys.js';
import { sleep } from '../../src/sleep.js';
import { recordSentAt, recordSentBy, toKafkaRecord, type KafkaRecord } from './record.js';
import { headerText, type Settlement } from './record-delivery.js';

/** What kafkajs passes to `eachMessage` (kafkajs `EachMessagePayload`). */
export interface EachMessagePayloadLike {
  /** Topic of the record. */
  readonly topic: string;
  /** Partition of the record. */
  readonly partition: number;
  /** The record. */
  readonly message: KafkaMessageLike;
  /** Heartbeats the group; throws when a rebalance is in progress. */
  heartbeat(): Promise<void>;
}

/**
 * Your existing `eachMessage` handler, plus a second argument: do the database work
 * through `ctx.tx` (the transaction that holds the dedup claim) and do not commit it.
 */
export type ExactlyOnceEachMessageHandler<
  P extends EachMessagePayloadLike = EachMessagePayloadLike,
> = (payload: P, ctx: HandlerContext<P>) => Promise<void>;

/** Options of {@link exactlyOnceEachMessage}: the consumer's options, plus Kafka specifics. */
export interface ExactlyOnceEachMessageOptions<
  P extends EachMessagePayloadLike = EachMessagePayloadLike,
> extends Omit<ConsumerOptions<P>, 'source' | 'handler' | 'key'> {
  /** Producer for dead letters (records that exhausted `maxAttempts` or have no usable key). Required. */
  producer: KafkaProducerLike;
  /** Dead-letter topic of a record. Default `${record.topic}.dlq`. */
  deadLetterTopic?: string | ((record: KafkaRecord) => string);
  /** Where the dedup key comes from, as `kafkaSource`'s `key`: a header's name or a function. Default `'idempotency-key'`. */
  key?: KafkaKey;
  /** Delay before a record whose settlement failed (dead-letter topic down) runs again. Default 1000 ms. */
  redeliveryDelayMs?: number;
}

/** A wrapped `eachMessage` handler and the consumer that runs it. */
export interface ExactlyOnceEachMessage<P extends EachMessagePayloadLike = EachMessagePayloadLike> {
  /** Pass to `consumer.run({ eachMessage })`; kafkajs's own offset handling stays as it is. */
  readonly eachMessage: (payload: P) => Promise<void>;
  /** The effectively-once consumer behind it, for `on(...)` events and `stats()`. */
  readonly consumer: Consumer;
  /** Stops the effectively-once consumer. Stop (or disconnect) the kafkajs consumer first. */
  stop(): Promise<void>;
}

/**
 * Makes an existing kafkajs `eachMessage` handler exactly-once: each record's key is
 * claimed in the dedup table inside the transaction handed to the handler as
 * `ctx.tx`, so a record kafkajs delivers again (after a crash, a rebalance or an
 * offset reset) is recognised as a duplicate instead of being applied twice.
 *
 * `eachMessage` resolves once the record is settled, so kafkajs resolves and commits
 * its offset as usual. A failing handler is retried in place with the consumer's
 * backoff (heartbeating meanwhile; a rebalance interrupts the wait and the record goes
 * to its next owner), then dead-lettered to `${topic}.dlq` after `maxAttempts`.
 *
 * ```ts
 * const eo = exactlyOnceEachMessage(async ({ message }, { tx }) => {
 *   await tx.query('INSERT INTO payments ...', [...]);
 * }, { name: 'payments', pool, producer });
 * await consumer.run({ eachMessage: eo.eachMessage });
 * ```
 */
export function exactlyOnceEachMessage<P extends EachMessagePayloadLike = EachMessagePayloadLike>(
  handler: ExactlyOnceEachMessageHandler<P>,
  options: ExactlyOnceEachMessageOptions<P>,
): ExactlyOnceEachMessage<P> {
  if (typeof handler !== 'function')
    throw new ConfigurationError('handler', 'must be a function (payload, ctx) => Promise<void>');
  refuseRenamed(options ?? {}, { idempotencyHeader: "use key: '<header name>'" });
  const {
    producer,
    deadLetterTopic,
    key: keyOption,
    redeliveryDelayMs,
    ...consumerOptions
  } = options;
  if (typeof producer?.send !== 'function') {
    throw new ConfigurationError('producer', 'is required: dead letters are produced with it');
  }
  if (
    deadLetterTopic !== undefined &&
    typeof deadLetterTopic !== 'function' &&
    (typeof deadLetterTopic !== 'string' || deadLetterTopic === '')
  ) {
    throw new ConfigurationError(
      'deadLetterTopic',
      'must be a topic name or a function (record) => topic',
    );
  }
  const { header, key } = kafkaKeyOption(keyOption);
  const redeliveryMs = redeliveryDelayMs ?? 1000;
  if (!Number.isInteger(redeliveryMs) || redeliveryMs < 0 || redeliveryMs > 3_600_000) {
    throw new ConfigurationError('redeliveryDelayMs', 'must be an integer from 0 to 3600000', {
      value: redeliveryDelayMs,
    });
  }
  const deadLetters = new DeadLetterPublisher(
    () => producer,
    false,
    typeof deadLetterTopic === 'function'
      ? deadLetterTopic
      : deadLetterTopic === undefined
        ? (record) => `${record.topic}.dlq`
        : () => deadLetterTopic,
  );
  const bridge = new PushSource<P>('kafka:eachMessage');
  const consumer = createConsumer<P>({ ...consumerOptions, source: bridge, handler });
  let started: Promise<void> | undefined;
  // A failed start (Postgres down during migrate) is not kept: the next record tries again.
  const ready = (): Promise<void> =>
    (started ??= consumer.start().catch((error: unknown) => {
      started = undefined;
      throw error;
    }));

  const eachMessage = async (payload: P): Promise<void> => {
    await ready();
    const record = toKafkaRecord(
      { topic: payload.topic, partition: payload.partition, messages: [] },
      payload.message,
    );
    const { key: dedupKey, rejection } = recordKey(record, key, header);
    // Counts the record's own failures only: a busy claim or an outage is not its fault.
    for (let attempt = 1; ;) {
      if (bridge.signal?.aborted === true)
        throw new ShutdownError(dedupKey ?? `${record.topic}/${record.partition}/${record.offset}`);
      let settled: Settlement | undefined;
      const settle = (s: Settlement) => void (settled ??= s);
      const delivery: Delivery<P> = {
        key: dedupKey,
        rejection,
        body: payload,
        payload: record.value ?? undefined,
        raw: record,
        attempt,
        orderingKey: `${record.topic}/${record.partition}`,
        // The record's timestamp, for the admission floor (read only when it is on).
        get firstSentAt() {
          return recordSentAt(record);
        },
        firstSentBy: recordSentBy(record),
        messaging: () => ({
          system: 'kafka',
          destination: record.topic,
          partition: record.partition,
          offset: record.offset,
          carrier: headerText(record.headers),
        }),
        ack: async () => settle({ kind: 'finished' }),
        retry: async (delayMs, _reason, attemptSpent = true) =>
          settle({ kind: 'retry', delayMs, attemptSpent }),
        release: async () => settle({ kind: 'released' }),
        deadLetter: async (reason) => {
          try {
            await deadLetters.publish(record, reason, attempt);
          } catch (error) {
            settle({ kind: 'retry', delayMs: redeliveryMs, attemptSpent: true });
            throw error;
          }
          settle({ kind: 'finished' });
        },
      };
      const outcome = await bridge.push(delivery);
      const settlement: Settlement =
        settled ??
        (outcome === 'released'
          ? { kind: 'released' }
          : { kind: 'retry', delayMs: redeliveryMs, attemptSpent: true });
      if (settlement.kind === 'finished') return;
      // Released at shutdown: kafkajs must not resolve this offset; the record comes back later.
      if (settlement.kind === 'released') throw new ShutdownError(dedupKey ?? record.offset);
      if (settlement.attemptSpent) attempt++;
      await heartbeatWhile(sleep(settlement.delayMs, bridge.signal), payload);
    }
  };

  return {
    eachMessage,
    consumer,
    stop: () => consumer.stop(),
  };
}
