/**
 * The consumer-side contenders: a plain worker, wired the way its library's README
 * shows, against the same worker wrapped by effectively-once, per broker. Shared by
 * the parent (labels, which broker) and the worker process (which wiring to run).
 */
export const CONSUMER_CONTENDERS = [
  'sqs-consumer',
  'sqs-consumer+withDedup',
  'kafkajs',
  'kafkajs+exactlyOnceEachMessage',
] as const;

export type ConsumerContender = (typeof CONSUMER_CONTENDERS)[number];

/** The broker a contender consumes from. */
export type ConsumerBroker = 'sqs' | 'kafka';

/** What the table says about each, and where it runs. */
export const CONSUMER_LABELS: Record<
  ConsumerContender,
  { library: string; wiring: string; broker: ConsumerBroker; effectivelyOnce: boolean }
> = {
  'sqs-consumer': {
    library: 'sqs-consumer',
    wiring: '`handleMessage` INSERTs, returns the message; sqs-consumer deletes it',
    broker: 'sqs',
    effectivelyOnce: false,
  },
  'sqs-consumer+withDedup': {
    library: 'sqs-consumer',
    wiring: 'the same handler in `withDedup` (effectively-once/sqs), INSERT through `ctx.tx`',
    broker: 'sqs',
    effectivelyOnce: true,
  },
  kafkajs: {
    library: 'kafkajs',
    wiring: '`eachMessage` INSERTs; kafkajs commits the offset (autoCommit)',
    broker: 'kafka',
    effectivelyOnce: false,
  },
  'kafkajs+exactlyOnceEachMessage': {
    library: 'kafkajs',
    wiring:
      'the same handler in `exactlyOnceEachMessage` (effectively-once/kafka), INSERT through `ctx.tx`',
    broker: 'kafka',
    effectivelyOnce: true,
  },
};

/** The message attribute (SQS) / header (Kafka) that arms a message's crash point. */
export const ARM_ATTRIBUTE = 'x-compare-arm';

/** The attribute / header holding the payment's key (effectively-once's dedup key). */
export const KEY_ATTRIBUTE = 'Idempotency-Key';

export function isConsumerContender(value: string): value is ConsumerContender {
  return (CONSUMER_CONTENDERS as readonly string[]).includes(value);
}
