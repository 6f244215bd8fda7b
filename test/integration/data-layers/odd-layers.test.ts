/**
 * Layers the consumer must not trust to look like pg:
 * - A data layer decodes results its own way: Prisma gives bytea as a plain Uint8Array,
 *   not a Buffer. The consumer reads a key's stored payload hash through the layer (a
 *   duplicate, a mismatch), per message and in batches, and must read it whatever the
 *   layer's bytea looks like. The layer here is the reference pg layer over a pool whose
 *   bytea parser returns a plain Uint8Array (as Prisma's adapter does).
 * - A bridge of the user's own may throw where the library does not expect it (here its
 *   `serverError`): the delivery must still be settled, as an infrastructure failure
 *   (retried, no attempt spent), with a `failed` event and the error logged.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { createConsumer, type Consumer, type ConsumerOptions } from '../../../src/index.js';
import type { Delivery, DeliveryOutcome, Source, SourceContext } from '../../../src/types.js';
import { createLayerDatabase, type LayerDatabase } from './matrix-consumer.js';
import { pgCallbackLayer } from './pg-layer.fixture.js';

const BYTEA = 17;

/** pg's own parsers, but bytea as a plain Uint8Array (not a Buffer). */
const uint8Types = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary'): unknown => {
    if (oid !== BYTEA) return pg.types.getTypeParser(oid, format) as unknown;
    const parse = pg.types.getTypeParser(BYTEA, 'text') as (text: string) => Buffer;
    return (text: string) => new Uint8Array(parse(text));
  }) as typeof pg.types.getTypeParser,
};

/** Delivers by hand; `deliver` resolves with what the consumer did, or 'unsettled'. */
class HandSource implements Source<{ n: number }> {
  readonly description = 'hand';
  private markReady!: (ctx: SourceContext<{ n: number }>) => void;
  private readonly ready = new Promise<SourceContext<{ n: number }>>(
    (resolve) => (this.markReady = resolve),
  );

  async run(ctx: SourceContext<{ n: number }>): Promise<void> {
    this.markReady(ctx);
    await new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve()));
  }

  async close(): Promise<void> {}

  /** How the last delivery's retry was asked for: whether it spent an attempt. */
  attemptSpent: boolean | undefined;

  async deliver(key: string, n: number, attempt = 1): Promise<DeliveryOutcome> {
    const ctx = await this.ready;
    const body = { n };
    const delivery: Delivery<{ n: number }> = {
      key,
      body,
      payload: JSON.stringify(body),
      raw: undefined,
      attempt,
      ack: async () => undefined,
      retry: async (_delayMs, _reason, attemptSpent) => {
        this.attemptSpent = attemptSpent ?? true;
      },
      deadLetter: async () => undefined,
      release: async () => undefined,
    };
    return ctx.deliver(delivery);
  }
}

describe('a layer that decodes bytea as a plain Uint8Array', () => {
  let db: LayerDatabase;
  let layerPool: pg.Pool;
  const running: Consumer[] = [];

  beforeAll(async () => {
    db = await createLayerDatabase('uint8_bytea');
    layerPool = new pg.Pool({ connectionString: db.url, types: uint8Types });
    layerPool.on('error', () => undefined);
  });
  afterAll(async () => {
    await Promise.all(running.map((c) => c.stop({ timeoutMs: 5000 })));
    await layerPool?.end();
    await db?.close();
  });

  async function consumer(
    name: string,
    over: Partial<ConsumerOptions<{ n: number }, pg.PoolClient>> = {},
  ): Promise<HandSource> {
    const source = new HandSource();
    const c = createConsumer<{ n: number }, pg.PoolClient>({
      name,
      source,
      pool: db.pool,
      dataLayer: pgCallbackLayer(layerPool),
      handler: async () => undefined,
      ...over,
    });
    running.push(c);
    await c.start();
    return source;
  }

  it('the layer does give bytea as a Uint8Array that is no Buffer', async () => {
    const { rows } = await layerPool.query<{ b: unknown }>("SELECT '\\x01ff'::bytea AS b");
    expect(rows[0]!.b).toBeInstanceOf(Uint8Array);
    expect(Buffer.isBuffer(rows[0]!.b)).toBe(false);
  });

  it('per message: a redelivery is a duplicate, another payload a mismatch', async () => {
    const source = await consumer('per-message');
    expect(await source.deliver('k1', 1)).toBe('processed');
    expect(await source.deliver('k1', 1, 2)).toBe('duplicate');
    expect(await source.deliver('k1', 2, 3)).toBe('dead-lettered');
  });

  it('in batches: a redelivery is a duplicate, another payload a mismatch', async () => {
    const source = await consumer('batch', { batch: { maxSize: 2, maxWaitMs: 10 } });
    expect(await source.deliver('b1', 1)).toBe('processed');
    expect(await source.deliver('b1', 1, 2)).toBe('duplicate');
    expect(await source.deliver('b1', 2, 3)).toBe('dead-lettered');
  });
});

describe('a bridge whose serverError throws', () => {
  let db: LayerDatabase;
  let layerPool: pg.Pool;
  let consumer: Consumer | undefined;

  beforeAll(async () => {
    db = await createLayerDatabase('throwing_bridge');
    layerPool = new pg.Pool({ connectionString: db.url });
    layerPool.on('error', () => undefined);
  });
  afterAll(async () => {
    await consumer?.stop({ timeoutMs: 5000 });
    await layerPool?.end();
    await db?.close();
  });

  it('settles the delivery as a failed infrastructure attempt and logs the error', async () => {
    const bug = new TypeError('the bridge broke');
    const logged: unknown[] = [];
    const failed: Array<{ code: string; willRetry: boolean }> = [];
    const source = new HandSource();
    consumer = createConsumer<{ n: number }, pg.PoolClient>({
      name: 'throwing-bridge',
      source,
      pool: db.pool,
      dataLayer: {
        ...pgCallbackLayer(layerPool),
        serverError: () => {
          throw bug;
        },
      },
      handler: async () => {
        throw new Error('the handler failed');
      },
      logger: {
        debug: () => undefined,
        info: () => undefined,
        warn: () => undefined,
        error: (fields: unknown) => void logged.push(fields),
      },
    });
    consumer.on('failed', (event) =>
      failed.push({ code: event.error.code, willRetry: event.willRetry }),
    );
    await consumer.start();
    expect(await source.deliver('t1', 1)).toBe('retry');
    expect(source.attemptSpent).toBe(false);
    expect(failed).toEqual([{ code: 'EO_DATABASE', willRetry: true }]);
    expect(logged).toContainEqual(expect.objectContaining({ err: bug, key: 't1' }));
  });
});
