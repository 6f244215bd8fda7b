/**
 * Batch mode, one ordering key (a FIFO message group / a Kafka partition). The
 * first delivery of the key is refused at admission (the adapter rejected it: an
 * undecodable body; the same holds for an invalid key or an expired delivery) and its
 * dead letter cannot be sent (DLQ unreachable): it goes back to the broker
 * ('unsettled') and will come again. The second delivery of the same key, in the same
 * batch, must not overtake it (per-message mode releases it). In batch mode the
 * admission outcome never opens the key: the follower is claimed and committed first.
 * The same holds for a mismatch whose dead letter fails in a committed batch: the
 * follower, in the next batch, must be released, not committed.
 *
 * A hand-written source, as docs/writing-a-source.md describes one.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  BodyParseError,
  BrokerError,
  createConsumer,
  migrate,
  type Delivery,
  type DeliveryOutcome,
  type Source,
  type SourceContext,
} from '../../../src/index.js';
import { createTestDatabase, type TestDatabase } from '../../helpers/db.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase('batch_admission_order');
  await migrate(db.pool, { schema: db.schema });
});
afterAll(async () => {
  await db.close();
});

class HandSource implements Source<string> {
  readonly description = 'hand';
  ctx!: SourceContext<string>;
  private markReady!: () => void;
  readonly ready = new Promise<void>((r) => (this.markReady = r));
  async run(ctx: SourceContext<string>): Promise<void> {
    this.ctx = ctx;
    this.markReady();
    if (!ctx.signal.aborted)
      await new Promise<void>((r) =>
        ctx.signal.addEventListener('abort', () => r(), { once: true }),
      );
  }
  async close(): Promise<void> {}
}

interface Spec {
  key: string;
  payload?: string;
  rejected?: boolean;
  /** The dead letter fails (DLQ unreachable); the ack and release go through. */
  calls: string[];
}

function delivery({ key, payload, rejected, calls }: Spec): Delivery<string> {
  return {
    key,
    body: key,
    payload: payload ?? key,
    raw: undefined,
    attempt: 1,
    orderingKey: 'group-1',
    ...(rejected === true ? { rejection: new BodyParseError('undecodable body') } : {}),
    ack: async () => void calls.push(`${key}:ack`),
    retry: async () => void calls.push(`${key}:retry`),
    deadLetter: async () => {
      calls.push(`${key}:deadLetter-failed`);
      throw new BrokerError('send to dead-letter queue', new Error('DLQ unreachable'));
    },
    release: async () => void calls.push(`${key}:release`),
  };
}

type Refusal = 'rejected by the adapter' | 'an invalid key' | 'a payload mismatch';

const modes: Array<[string, { maxSize: number; maxWaitMs: number } | undefined]> = [
  ['per message (control)', undefined],
  ['batch mode', { maxSize: 10, maxWaitMs: 50 }],
];
const refusals: Refusal[] = ['rejected by the adapter', 'an invalid key', 'a payload mismatch'];
const cases = refusals.flatMap((refusal) =>
  modes.map(([mode, batch]) => {
    // A mismatch is found in a committed batch, where a follower in the same batch
    // commits with it: the follower that must wait is in the next batch.
    const size =
      refusal === 'a payload mismatch' && batch !== undefined ? { ...batch, maxSize: 1 } : batch;
    return { refusal, mode, batch: size };
  }),
);

describe('a delivery refused whose dead letter fails goes back to the broker', () => {
  it.each(cases)(
    '$refusal, $mode: its follower of the same ordering key is not applied first',
    async ({ refusal, batch }) => {
      const applied: string[] = [];
      const calls: string[] = [];
      const source = new HandSource();
      const name = `admission-order-${refusals.indexOf(refusal)}-${batch === undefined ? 'm' : 'b'}`;
      const consumer = createConsumer<string>({
        name,
        source,
        pool: db.pool,
        schema: db.schema,
        ...(batch === undefined ? {} : { batch }),
        handler: async (body) => {
          applied.push(body);
        },
      });
      consumer.on('error', () => undefined);
      await consumer.start();
      try {
        await source.ready;
        const firstKey = refusal === 'an invalid key' ? '' : `${name}-first`;
        if (refusal === 'a payload mismatch') {
          // The key is committed with another payload first.
          expect(
            await source.ctx.deliver(delivery({ key: firstKey, payload: 'before', calls })),
          ).toBe('processed');
          applied.length = 0;
        }
        const first = source.ctx.deliver(
          delivery({ key: firstKey, rejected: refusal === 'rejected by the adapter', calls }),
        );
        const second = source.ctx.deliver(delivery({ key: `${name}-second`, calls }));
        const outcomes: DeliveryOutcome[] = await Promise.all([first, second]);
        // `first` went back (unsettled) and will be redelivered; `second`, received after
        // it in the same group, must go back too (released), not be applied before it.
        expect({ outcomes, applied }).toEqual({
          outcomes: ['unsettled', 'released'],
          applied: [],
        });
      } finally {
        await consumer.stop();
      }
    },
  );
});
