import amqp, { type ChannelModel, type ConfirmChannel } from 'amqplib';
import { delayStep, RABBITMQ_HEADERS } from 'effectively-once/rabbitmq';
import { sleep } from '../../src/sleep.js';
import { IDEMPOTENCY_HEADER, type ChaosBroker, type DeadLetter } from './broker-api.js';
import type { Send } from './plan.js';

const CHUNK = 200;

/**
 * The delays a worker's retries can wait (its backoff runs 100..1000 ms, a busy claim
 * 500 ms): the delay queues the source declares for them, `<queue>.eo-retry.<step>`.
 */
const RETRY_DELAYS_MS = [100, 200, 400, 500, 800, 1000];

/**
 * A quorum work queue (durable, replicated log: what survives a crash on a node, and
 * counts redeliveries as `x-delivery-count`) and the dead letters' exchange and queue.
 * Messages carry the idempotency key in a header; the producer publishes them
 * persistent, with publisher confirms, and sends a chunk again when its confirms did
 * not come (the broker restarts mid-run).
 */
export async function createRabbitmqBroker(url: string, runId: string): Promise<ChaosBroker> {
  const queue = `chaos-${runId}`;
  const deadLetterExchange = `${queue}.dlx`;
  const deadLetterQueue = `${queue}.dlq`;
  const retryQueues = [...new Set(RETRY_DELAYS_MS.map(delayStep).filter((s) => s > 0))].map(
    (step) => `${queue}.eo-retry.${step}`,
  );

  // One connection for the producer and the checks, opened again after the broker restarted.
  let connection: Promise<ChannelModel> | undefined;
  const connected = (): Promise<ChannelModel> => {
    connection ??= amqp.connect(url).then((c) => {
      c.on('error', () => undefined);
      c.once('close', () => (connection = undefined));
      return c;
    });
    connection.catch(() => (connection = undefined));
    return connection;
  };
  let confirms: Promise<ConfirmChannel> | undefined;
  const confirmChannel = (): Promise<ConfirmChannel> => {
    confirms ??= connected().then(async (c) => {
      const channel = await c.createConfirmChannel();
      channel.on('error', () => undefined);
      channel.once('close', () => (confirms = undefined));
      return channel;
    });
    confirms.catch(() => (confirms = undefined));
    return confirms;
  };

  {
    const setup = await (await connected()).createChannel();
    await setup.assertQueue(queue, { durable: true, arguments: { 'x-queue-type': 'quorum' } });
    await setup.assertExchange(deadLetterExchange, 'fanout', { durable: true });
    await setup.assertQueue(deadLetterQueue, {
      durable: true,
      arguments: { 'x-queue-type': 'quorum' },
    });
    await setup.bindQueue(deadLetterQueue, deadLetterExchange, '');
    await setup.close();
  }

  /** Ready messages in `name` (0 when it does not exist: a delay step never used). */
  const ready = async (name: string): Promise<number> => {
    const channel = await (await connected()).createChannel();
    channel.on('error', () => undefined);
    try {
      return (await channel.checkQueue(name)).messageCount;
    } catch (error) {
      if ((error as { code?: unknown }).code === 404) return 0;
      throw error;
    } finally {
      await channel.close().catch(() => undefined);
    }
  };

  return {
    worker: { kind: 'rabbitmq', url, queue, deadLetterExchange },
    codedDeadLetters: true,

    async send(sends: Send[], signal: AbortSignal) {
      let resent = 0;
      for (let i = 0; i < sends.length && !signal.aborted; i += CHUNK) {
        const chunk = sends.slice(i, i + CHUNK);
        for (let attempt = 1; !signal.aborted; attempt++) {
          try {
            const channel = await confirmChannel();
            for (const s of chunk)
              channel.publish('', queue, Buffer.from(s.body), {
                persistent: true,
                contentType: 'application/json',
                headers: { [IDEMPOTENCY_HEADER]: s.key },
              });
            await channel.waitForConfirms();
            break;
          } catch {
            // Some of the chunk may be stored: sending it again makes producer duplicates.
            resent += chunk.length;
            const broken = confirms;
            confirms = undefined;
            await broken?.then((c) => c.close()).catch(() => undefined);
            await sleep(Math.min(200 * attempt, 2000));
          }
        }
      }
      return { resent };
    },

    /**
     * Nothing ready in the work queue or a delay queue. Unacknowledged deliveries are not
     * counted (AMQP does not say how many; the management API is not enabled): the run
     * checks this only once every key is applied and every dead letter is there, or five
     * times in a row, and a worker that dies hands its unacked messages back as ready.
     */
    async drained() {
      for (const name of [queue, ...retryQueues]) if ((await ready(name)) > 0) return false;
      return true;
    },

    deadLetterCount: () => ready(deadLetterQueue),

    async deadLetters() {
      const letters: DeadLetter[] = [];
      const channel = await (await connected()).createChannel();
      try {
        // Read without acking; closing the channel puts them back.
        for (;;) {
          const message = await channel.get(deadLetterQueue, { noAck: false });
          if (message === false) break;
          const headers = message.properties.headers ?? {};
          const key = headers[IDEMPOTENCY_HEADER] as unknown;
          const code = headers[RABBITMQ_HEADERS.errorCode] as unknown;
          letters.push({
            key: typeof key === 'string' ? key : `(no key: tag ${message.fields.deliveryTag})`,
            code: typeof code === 'string' ? code : undefined,
          });
        }
      } finally {
        await channel.close().catch(() => undefined);
      }
      return letters;
    },

    async close(cleanup) {
      try {
        if (cleanup) {
          const channel = await (await connected()).createChannel();
          channel.on('error', () => undefined);
          for (const name of [queue, deadLetterQueue, ...retryQueues])
            await channel.deleteQueue(name).catch(() => undefined);
          await channel.deleteExchange(deadLetterExchange).catch(() => undefined);
          await channel.close().catch(() => undefined);
        }
      } finally {
        await connection?.then((c) => c.close()).catch(() => undefined);
      }
    },
  };
}
