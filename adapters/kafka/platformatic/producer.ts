import { ConfigurationError } from '../../../src/errors.js';
import type { KafkaOutgoingMessage, KafkaProducerLike } from '../client.js';
import type { PlatformaticMessageToProduce, PlatformaticProducerLike } from './types.js';

/**
 * A `@platformatic/kafka` `Producer` in the kafkajs `Producer` shape the dead-letter
 * publisher uses. The client connects on first use, so `connect` does nothing; strings
 * become UTF-8 bytes, and a repeated header stays repeated (distinct Buffer keys).
 */
export function platformaticProducer(client: PlatformaticProducerLike): KafkaProducerLike {
  if (typeof (client as Partial<PlatformaticProducerLike> | null)?.send !== 'function')
    throw new ConfigurationError(
      'producer',
      'must be a @platformatic/kafka Producer (with send())',
    );
  return {
    connect: async () => undefined,
    disconnect: () => client.close(),
    send: ({ topic, acks, messages }) =>
      client.send({
        messages: messages.map((m) => toProduce(topic, m)),
        ...(acks === undefined ? {} : { acks }),
      }),
  };
}

function toProduce(topic: string, message: KafkaOutgoingMessage): PlatformaticMessageToProduce {
  const out: PlatformaticMessageToProduce = { topic };
  if (message.key !== undefined && message.key !== null) out.key = bytes(message.key);
  if (message.value !== null) out.value = bytes(message.value);
  if (message.headers !== undefined) {
    const headers = new Map<Buffer, Buffer>();
    for (const [name, value] of Object.entries(message.headers)) {
      for (const one of Array.isArray(value) ? value : [value]) {
        headers.set(Buffer.from(name), bytes(one));
      }
    }
    out.headers = headers;
  }
  return out;
}

function bytes(value: Buffer | string): Buffer {
  return typeof value === 'string' ? Buffer.from(value) : value;
}
