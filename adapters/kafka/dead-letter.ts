import { BrokerError, type EffectivelyOnceError } from '../../src/errors.js';
import type { KafkaOutgoingMessage, KafkaProducerLike } from './client.js';
import type { KafkaRecord } from './record.js';

/** Headers the adapter adds to a dead letter (the record's own headers are kept). */
export const DEAD_LETTER_HEADERS = {
  topic: 'eo-original-topic',
  partition: 'eo-original-partition',
  offset: 'eo-original-offset',
  timestamp: 'eo-original-timestamp',
  error: 'eo-error',
  errorCode: 'eo-error-code',
  attempts: 'eo-attempts',
  deadLetteredAt: 'eo-dead-lettered-at',
} as const;

const MAX_ERROR_LENGTH = 4096;

/**
 * The dead letter of `record`: same key, value and headers (so the idempotency key
 * survives a redrive), plus where it came from, why and after how many attempts.
 */
export function deadLetterMessage(
  record: KafkaRecord,
  reason: EffectivelyOnceError,
  attempts: number,
): KafkaOutgoingMessage {
  const headers: Record<string, Buffer | string | Array<Buffer | string>> = {};
  for (const [name, value] of Object.entries(record.headers)) {
    if (value !== undefined)
      headers[name] = typeof value === 'string' || Buffer.isBuffer(value) ? value : [...value];
  }
  const error =
    reason.message.length > MAX_ERROR_LENGTH
      ? `${reason.message.slice(0, MAX_ERROR_LENGTH)}…`
      : reason.message;
  headers[DEAD_LETTER_HEADERS.topic] = record.topic;
  headers[DEAD_LETTER_HEADERS.partition] = String(record.partition);
  headers[DEAD_LETTER_HEADERS.offset] = record.offset;
  headers[DEAD_LETTER_HEADERS.timestamp] = record.timestamp;
  headers[DEAD_LETTER_HEADERS.error] = error;
  headers[DEAD_LETTER_HEADERS.errorCode] = reason.code;
  headers[DEAD_LETTER_HEADERS.attempts] = String(attempts);
  headers[DEAD_LETTER_HEADERS.deadLetteredAt] = new Date().toISOString();
  return { key: record.key, value: record.value, headers };
}

/**
 * Produces dead letters (acks from all in-sync replicas), connecting the producer on
 * first use; disconnects it on close only if the adapter created it.
 */
export class DeadLetterPublisher {
  private connecting: Promise<void> | undefined;

  constructor(
    private readonly producer: () => KafkaProducerLike,
    private readonly owned: boolean,
    private readonly topicOf: (record: KafkaRecord) => string,
  ) {}

  /** Resolves once the dead letter is durably written; rejects with a {@link BrokerError}. */
  async publish(
    record: KafkaRecord,
    reason: EffectivelyOnceError,
    attempts: number,
  ): Promise<void> {
    const topic = this.topicOf(record);
    try {
      const producer = this.producer();
      // connect() is idempotent in kafkajs, so a producer the caller connected is fine too.
      this.connecting ??= producer.connect().catch((error: unknown) => {
        this.connecting = undefined;
        throw error;
      });
      await this.connecting;
      await producer.send({
        topic,
        acks: -1,
        messages: [deadLetterMessage(record, reason, attempts)],
      });
    } catch (cause) {
      throw new BrokerError('send to dead-letter topic', cause, {
        details: {
          deadLetterTopic: topic,
          topic: record.topic,
          partition: record.partition,
          offset: record.offset,
        },
      });
    }
  }

  /** Disconnects the producer if the adapter created it. */
  async close(): Promise<void> {
    if (!this.owned || this.connecting === undefined) return;
    this.connecting = undefined;
    await this.producer().disconnect();
  }
}
