import type { KafkaLike } from 'effectively-once/kafka';
import { platformaticConsumer, platformaticProducer } from 'effectively-once/kafka/platformatic';
import type { RunContext } from '../context.js';

/**
 * `--kafka-client platformatic`: kafkaSource's consumer and dead-letter producer over
 * `@platformatic/kafka` (imported only then: it needs Node >= 22.22). The clock starts
 * at the group join, as with kafkajs.
 */
export async function platformaticKafka(ctx: RunContext, brokers: string): Promise<KafkaLike> {
  const { Consumer, Producer } = await import('@platformatic/kafka');
  const bootstrapBrokers = brokers.split(',');
  return {
    consumer: (config) => {
      const client = new Consumer({
        groupId: config.groupId,
        clientId: 'bench',
        bootstrapBrokers,
        autocommit: false,
      });
      client.on('consumer:group:join', () => ctx.drain.start());
      return platformaticConsumer(client);
    },
    producer: () => platformaticProducer(new Producer({ clientId: 'bench', bootstrapBrokers })),
  };
}
