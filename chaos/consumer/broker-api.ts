import type { Send } from './plan.js';
import type { WorkerBrokerConfig } from './protocol.js';

// What a broker kind implements (sqs-broker.ts, kafka-broker.ts, rabbitmq-broker.ts). A module of its own,
// so the kinds do not import the factory that loads them.

/** The broker side of a chaos run: queues or topics, the producer, and the checks. */
export interface ChaosBroker {
  /** What workers need to consume (and dead-letter). */
  readonly worker: WorkerBrokerConfig;
  /**
   * Dead letters carry the adapter's error code. False when the broker moves them itself
   * (Lambda mode's redrive policy): the checker then cannot check their codes.
   */
  readonly codedDeadLetters: boolean;
  /** Sends everything, retrying failed sends until done or `signal` aborts; returns the re-sends. */
  send(sends: Send[], signal: AbortSignal): Promise<{ resent: number }>;
  /** Nothing left to consume: SQS queue empty (visible, in flight, delayed) / Kafka group lag 0 / RabbitMQ nothing ready. */
  drained(): Promise<boolean>;
  /** Messages in the dead-letter target so far. */
  deadLetterCount(): Promise<number>;
  /** Every dead letter's idempotency key and error code (a key may appear twice if a move was repeated). */
  deadLetters(): Promise<DeadLetter[]>;
  /** Deletes the run's queues/topics when asked, and closes clients. */
  close(cleanup: boolean): Promise<void>;
}

/** A dead letter as the checker sees it. */
export interface DeadLetter {
  key: string;
  /**
   * The error code the adapter attached: the `code` of the SQS `EffectivelyOnce-Error`
   * attribute, the Kafka and RabbitMQ `eo-error-code` header; undefined when absent.
   */
  code: string | undefined;
}

/** The SQS message attribute holding a message's idempotency key. */
export const IDEMPOTENCY_ATTRIBUTE = 'Idempotency-Key';
/** The Kafka (and RabbitMQ) header holding a record's idempotency key. */
export const IDEMPOTENCY_HEADER = 'idempotency-key';
