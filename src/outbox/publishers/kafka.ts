import type { Kafka, Producer, ProducerConfig } from 'kafkajs';
import { ConfigurationError } from '../../errors.js';
import { PublishError } from '../errors.js';
import { OUTBOX_ID_HEADER, type Publisher } from '../record.js';

/** Options of {@link kafkaPublisher}. */
export interface KafkaPublisherOptions {
  /** The kafkajs client; the publisher makes its own idempotent producer from it. */
  kafka: Kafka;
  /** The topic every row of this destination goes to. */
  topic: string;
  /** Extra producer settings; `idempotent` is always on. */
  producer?: Omit<ProducerConfig, 'idempotent'>;
}

/** A {@link Publisher} that owns a Kafka producer: close it after the relay stopped. */
export interface KafkaPublisher extends Publisher {
  /** Disconnects the producer. */
  close(): Promise<void>;
}

/**
 * Publishes to one Kafka topic through an idempotent producer (`acks: all`), so the
 * producer's own retries add no duplicates. The record key is the ordering key (rows
 * of one key share a partition, in order; rows without one have a null key), and
 * header `eo-outbox-id` carries the outbox id (the default dedup key of this library's
 * `kafkaSource`), beside the row's headers and `content-type`. A batch succeeds or
 * fails whole.
 */
export function kafkaPublisher(options: KafkaPublisherOptions): KafkaPublisher {
  if (options.kafka === undefined || options.kafka === null)
    throw new ConfigurationError('kafka', 'a kafkajs Kafka client is required');
  if (typeof options.topic !== 'string' || options.topic === '')
    throw new ConfigurationError('topic', 'must be a topic name');
  let producer: Producer | undefined;
  let connecting: Promise<Producer> | undefined;

  const connected = (): Promise<Producer> => {
    connecting ??= (async () => {
      // One in-flight request per connection keeps order across the producer's retries.
      const p = options.kafka.producer({
        maxInFlightRequests: 1,
        ...options.producer,
        idempotent: true,
      });
      try {
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
      await p?.disconnect();
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
