import type { KafkaLike } from 'effectively-once/kafka';
import type { SQSClient } from '@aws-sdk/client-sqs';
import type { AmqpConnectionLike } from 'effectively-once/rabbitmq';
import type { FaultPoint } from './protocol.js';

/** Dies the way a crash does: no `finally`, no flush, no goodbye to the broker. */
export function die(): never {
  process.kill(process.pid, 'SIGKILL');
  throw new Error('unreachable: SIGKILL sent to self');
}

/**
 * The worker's armed fault point, if any. The parent arms one over IPC; the first
 * time the worker passes that point, it SIGKILLs itself there.
 */
export class Faults {
  private armed: FaultPoint | undefined;

  arm(point: FaultPoint): void {
    this.armed = point;
  }

  /** True (and disarms) when `point` is armed: the caller is about to die. */
  take(point: FaultPoint): boolean {
    if (this.armed !== point) return false;
    this.armed = undefined;
    return true;
  }

  /** Dies here if `point` is armed. */
  at(point: FaultPoint): void {
    if (this.take(point)) die();
  }
}

/**
 * Half the time the request is dispatched and the process dies while it is on the
 * wire (the broker may or may not apply it); otherwise the answer arrives and the
 * process dies before the adapter sees it (applied, but never confirmed).
 */
function dieAround<R>(request: () => Promise<R>): Promise<R> {
  const result = request();
  if (Math.random() < 0.5) setTimeout(die, Math.random() * 4);
  else void result.then(die, die);
  return result;
}

/** `during-ack` for SQS: an SDK middleware around `DeleteMessageBatch`. */
export function armSqsDeletes(client: SQSClient, faults: Faults): void {
  client.middlewareStack.add(
    (next, context) => (args) => {
      if (context.commandName === 'DeleteMessageBatchCommand' && faults.take('during-ack')) {
        return dieAround(() => next(args));
      }
      return next(args);
    },
    { step: 'initialize', name: 'chaosDuringAck' },
  );
}

/** `during-ack` for Kafka: wraps `commitOffsets` of the consumer the adapter creates. */
export function armKafkaCommits(kafka: KafkaLike, faults: Faults): KafkaLike {
  return {
    consumer(config) {
      const consumer = kafka.consumer(config);
      const commit = consumer.commitOffsets.bind(consumer);
      consumer.commitOffsets = (offsets) =>
        faults.take('during-ack') ? dieAround(() => commit(offsets)) : commit(offsets);
      return consumer;
    },
    producer: (config) => kafka.producer(config),
  };
}

/**
 * `during-ack` for RabbitMQ: wraps `ack` of the channels the source opens. `basic.ack`
 * has no answer; half the time the worker dies at once after writing it (the frame is
 * likely still in the process), otherwise within a few ms (it is likely on the wire).
 */
export function armRabbitmqAcks(
  connection: AmqpConnectionLike,
  faults: Faults,
): AmqpConnectionLike {
  return {
    async createChannel() {
      const channel = await connection.createChannel();
      const ack = channel.ack.bind(channel);
      channel.ack = (message, allUpTo) => {
        ack(message, allUpTo);
        if (!faults.take('during-ack')) return;
        if (Math.random() < 0.5) die();
        setTimeout(die, Math.random() * 4);
      };
      return channel;
    },
    createConfirmChannel: () => connection.createConfirmChannel(),
    close: () => connection.close(),
  };
}
