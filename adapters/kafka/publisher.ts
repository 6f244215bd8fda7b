import { ConfigurationError } from '../../src/errors.js';
import { PublishError } from '../../src/outbox/errors.js';
import { OUTBOX_ID_HEADER, type Publisher } from '../../src/outbox/record.js';
import type { KafkaLike, KafkaProducerConfig, KafkaProducerLike } from './client.js';

/**
 * Options of {@link kafkaPublisher}: give exactly one of `kafka` and `producer`, as for
 * `kafkaSource`.
 */
export interface KafkaPublisherOptions {
  /** The topic every row of this destination goes to. */
  topic: string;
  /**
   * A kafkajs `Kafka` instance (or compatible): the publisher makes its own idempotent
   * producer from it (`idempotent: true`, one request in flight) and disconnects it on
   * `close()`.
   */
  kafka?: KafkaLike;
  /** Extra settings for the producer made from `kafka`; `idempotent` is always on. */
  producerConfig?: Omit<KafkaProducerConfig, 'idempotent'>;
  /**
   * A producer you made and close: a kafkajs `Producer`, or a `@platformatic/kafka`
   * `Producer` through `platformaticProducer` (from `effectively-once/kafka/platformatic`).
   * Make it idempotent (`idempotent: true` on either client), so its own retries add no
   * duplicates and keep a key's order. The publisher connects it on first use.
   */
  producer?: KafkaProducerLike;
}

/** An outbox `Publisher` over a Kafka producer: close it after the relay stopped. */
export interface KafkaPublisher extends Publisher {
  /** Disconnects the producer the publisher made from `kafka`; a given `producer` is yours. */
  close(): Promise<void>;
}

/**
 * Publishes to one Kafka topic through an idempotent producer (`acks: all`), so the
 * producer's own retries add no duplicates. The record key is the ordering key (rows
 * of one key share a partition, in order; rows without one have a null key), and
 * header `eo-outbox-id` carries the outbox id (the default dedup key of this library's
 * `kafkaSource`), beside the row's headers and `content-type`. A batch succeeds or
 * fails whole. Runs on kafkajs (`kafka` or `producer`) and on `@platformatic/kafka`
 * (`producer: platformaticProducer(new Producer({ idempotent: true, … }))`).
 */
export function kafkaPublisher(options: KafkaPublisherOptions): KafkaPublisher {
  // `?? undefined`: a JavaScript caller's null counts as not given.
  const kafka = options.kafka ?? undefined;
  const given = options.producer ?? undefined;
  if ((kafka === undefined) === (given === undefined))
    throw new ConfigurationError(
      'kafka',
      'give exactly one of `kafka` (a kafkajs Kafka) and `producer`',
    );
  if (kafka !== undefined && typeof kafka.producer !== 'function')
    throw new ConfigurationError('kafka', 'must be a kafkajs Kafka instance (with producer())');
  if (
    given !== undefined &&
    (typeof given.send !== 'function' || typeof given.connect !== 'function')
  )
    throw new ConfigurationError(
      'producer',
      'must be a kafkajs Producer or a platformaticProducer (with connect() and send())',
    );
  if (given !== undefined && options.producerConfig !== undefined)
    throw new ConfigurationError(
      'producerConfig',
      'applies to the producer made from `kafka`; configure your own `producer` yourself',
    );
  if (typeof options.topic !== 'string' || options.topic === '')
    throw new ConfigurationError('topic', 'must be a topic name');
  const owned = given === undefined;
  let producer: KafkaProducerLike | undefined;
  let connecting: Promise<KafkaProducerLike> | undefined;

  const connected = (): Promise<KafkaProducerLike> => {
    connecting ??= (async () => {
      // One in-flight request per connection keeps order across the producer's retries.
      const p =
        given ??
        (kafka as KafkaLike).producer({
          maxInFlightRequests: 1,
          ...options.producerConfig,
          idempotent: true,
        });
      try {
        // connect() is idempotent in kafkajs, so a producer the caller connected is fine too.
        await p.connect();
      } catch (error) {
        connecting = undefined;
        throw error;
      }
      producer = p;
      return p;
    })();
    return connecting;
  };

  return {
    async publish(records, signal) {
      try {
        // Nothing is sent once the relay gave up on the call: a send after its timeout
        // would race the row's retry. kafkajs cannot cancel a request already on the
        // wire; one that lands late is a duplicate the receiver drops by its outbox id.
        const p = await untilAborted(connected(), signal);
        await untilAborted(
          p.send({
            topic: options.topic,
            acks: -1,
            messages: records.map((record) => ({
              key: record.orderingKey,
              value: record.payload,
              headers: {
                ...record.headers,
                'content-type': record.contentType,
                [OUTBOX_ID_HEADER]: record.id,
              },
            })),
          }),
          signal,
        );
      } catch (cause) {
        throw new PublishError(
          options.topic,
          signal.aborted ? 'aborted, not sent' : 'Kafka send failed',
          { cause: signal.aborted ? signal.reason : cause },
        );
      }
      return undefined;
    },
    async close() {
      const p = producer;
      producer = undefined;
      connecting = undefined;
      if (owned) await p?.disconnect();
    },
  };
}

/**
 * `work`, or a rejection as soon as `signal` aborts (at once when it already has). The
 * work itself goes on: its later failure is swallowed here.
 */
function untilAborted<T>(work: Promise<T>, signal: AbortSignal): Promise<T> {
  work.catch(() => undefined);
  if (signal.aborted) return Promise.reject(signal.reason as Error);
  let onAbort: () => void = () => undefined;
  const aborted = new Promise<never>((_, reject) => {
    onAbort = () => reject(signal.reason as Error);
    signal.addEventListener('abort', onAbort, { once: true });
  });
  return Promise.race([work, aborted]).finally(() => signal.removeEventListener('abort', onAbort));
}
