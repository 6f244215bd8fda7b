import type { Channel, ChannelModel, ConsumeMessage } from 'amqplib';
import { rabbitmqSource } from 'effectively-once/rabbitmq';
import type { RunContext } from '../context.js';
import { insertCharge } from '../effect.js';
import { runEffectivelyOnce, STALL_MS } from '../eo-consumer.js';
import { InboxProgress, runInboxWorkers, storeInInbox } from '../inbox.js';
import { decodeMessage, type BenchMessage } from '../message.js';

export interface RabbitmqTarget {
  connection: ChannelModel;
  queue: string;
  url: string;
  /** Closes `channel` when the driver closes (see {@link runAmqplib}). */
  closeLater: (channel: Channel) => void;
}

export type RabbitmqScenario = 'a' | 'b' | 'c' | 'd' | 'f';
type Runner = (ctx: RunContext, target: RabbitmqTarget) => Promise<void>;

/** Unacked messages the broker ceiling (d) lets the broker hand out at once. */
const CEILING_PREFETCH = 1000;

/**
 * The at-least-once worker amqplib's tutorials show: one channel, `prefetch` =
 * `concurrency`, `consume` with manual acks, the work then `channel.ack`. `onAck` runs
 * once the ack is written. When drained, the consumer is cancelled and its channel left
 * open until the driver closes: a quorum queue applies acks (low-priority commands in
 * its log) after the close of a channel that closes right behind them, and puts those
 * messages back (seen in d: 15 to 166 of 200 left on the broker).
 */
async function runAmqplib(
  ctx: RunContext,
  { connection, queue, closeLater }: RabbitmqTarget,
  prefetch: number,
  handle: (message: BenchMessage, body: string) => Promise<void>,
  onAck: (message: BenchMessage) => void,
): Promise<void> {
  const channel = await connection.createChannel();
  channel.on('error', (error: unknown) => ctx.drain.fail(error));
  closeLater(channel);
  let consumerTag: string | undefined;
  try {
    await channel.prefetch(prefetch);
    ({ consumerTag } = await channel.consume(
      queue,
      (message: ConsumeMessage | null) => {
        if (message === null) return ctx.drain.fail(new Error('bench: consumer cancelled'));
        ctx.drain.start();
        const body = message.content.toString();
        const decoded = decodeMessage(body);
        handle(decoded, body).then(
          () => {
            channel.ack(message);
            onAck(decoded);
          },
          (error: unknown) => ctx.drain.fail(error),
        );
      },
      { noAck: false },
    ));
    await ctx.drain.wait(STALL_MS);
  } finally {
    if (consumerTag !== undefined) await channel.cancel(consumerTag).catch(() => undefined);
  }
}

/** b and c's source: prefetch leaves room for the runner's in-flight acks (b) or whole batches (c). */
const source = (ctx: RunContext, { connection, queue }: RabbitmqTarget, prefetch: number) =>
  rabbitmqSource<BenchMessage>({
    connection,
    queue,
    prefetch,
    parse: (m) => decodeMessage(m.content),
  });

export const rabbitmqScenarios: Record<RabbitmqScenario, Runner> = {
  a: (ctx, target) =>
    runAmqplib(
      ctx,
      target,
      ctx.concurrency,
      (message) => insertCharge(ctx.pool, message),
      (message) => ctx.drain.done(message.id),
    ),
  // The dispatcher keeps twice the consumer's concurrency in flight (see createConsumer).
  b: (ctx, target) =>
    runEffectivelyOnce(ctx, source(ctx, target, 2 * ctx.consumerConcurrency), 'per-message'),
  c: (ctx, target) =>
    runEffectivelyOnce(
      ctx,
      source(ctx, target, (ctx.consumerConcurrency + 1) * ctx.batchSize),
      'batch',
    ),
  // d: what the broker and the client can do: every message acked as it arrives, no database.
  d: (ctx, target) =>
    runAmqplib(
      ctx,
      target,
      CEILING_PREFETCH,
      async () => undefined,
      (message) => ctx.drain.done(message.id, Date.now() - message.sentAt),
    ),
  f: async (ctx, target) => {
    const progress = new InboxProgress(ctx);
    const workers = runInboxWorkers(ctx, progress);
    workers.catch((error: unknown) => ctx.drain.fail(error));
    await runAmqplib(
      ctx,
      target,
      ctx.concurrency,
      (message, body) => storeInInbox(ctx.pool, message, body),
      (message) => progress.acked(message.id),
    );
    await workers;
  },
};
