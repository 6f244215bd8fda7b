/**
 * The consumer door's guarantee matrix, for one data layer (each layer's test file calls
 * {@link consumerMatrix} with its fixture): through `createConsumer({ dataLayer })` and a
 * source driven by hand, on a database of the test file's own, the effect written in
 * the layer's idiom commits with its claim or not at all, whatever the handler, the
 * layer, COMMIT or the connection do.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import {
  CommitFailedError,
  createConsumer,
  HandlerTimeoutError,
  type EffectivelyOnceError,
} from '../../../src/index.js';
import type { ConsumerOptions } from '../../../src/consumer/options.js';
import { enqueue, migrateOutbox } from '../../../src/outbox/index.js';
import type { Consumer } from '../../../src/consumer/types.js';
import type { Delivery, DeliveryOutcome, Source, SourceContext } from '../../../src/types.js';
import { databaseUrl } from '../../helpers/env.js';
import { waitFor } from '../../helpers/wait-for.js';
import { EFFECTS_TABLE, type LayerFixture, type OpenedLayer } from './fixture.js';

/** A database of one test file's own, with the effects table the fixtures write to. */
export interface LayerDatabase {
  /** Its connection string. */
  readonly url: string;
  /** The library's pool on it (migrations, the other connection), and the test's reads. */
  readonly pool: pg.Pool;
  /** Drops it. */
  close(): Promise<void>;
}

/**
 * Creates a fresh database on the test server (`CREATE DATABASE`), with
 * `layer_effects` and its deferred constraint trigger (fails at COMMIT when
 * `amount < 0`, SQLSTATE 23514).
 */
export async function createLayerDatabase(prefix: string): Promise<LayerDatabase> {
  const name = `eo_${prefix.replace(/[^a-z0-9]/gi, '_').toLowerCase()}_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: databaseUrl() });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE "${name}"`);
  } finally {
    await admin.end();
  }
  const url = new URL(databaseUrl());
  url.pathname = `/${name}`;
  const pool = new pg.Pool({ connectionString: url.toString(), max: 20 });
  pool.on('error', () => undefined);
  await pool.query(`
    CREATE TABLE ${EFFECTS_TABLE} (id text PRIMARY KEY, door text NOT NULL, amount integer NOT NULL);
    CREATE FUNCTION layer_effects_check() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF NEW.amount < 0 THEN
        RAISE EXCEPTION 'negative amount for %', NEW.id USING ERRCODE = '23514';
      END IF;
      RETURN NULL;
    END $$;
    CREATE CONSTRAINT TRIGGER layer_effects_nonnegative AFTER INSERT OR UPDATE ON ${EFFECTS_TABLE}
      DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION layer_effects_check();
  `);
  return {
    url: url.toString(),
    pool,
    close: async () => {
      await pool.end();
      const drop = new pg.Client({ connectionString: databaseUrl() });
      await drop.connect();
      try {
        await drop.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
      } finally {
        await drop.end();
      }
    },
  };
}

/** What the consumer did with one delivery. */
interface Settled {
  outcome: DeliveryOutcome;
  calls: string[];
  reason?: EffectivelyOnceError;
  /** The `attemptSpent` of its retry: false for a failure that was not the message's. */
  attemptSpent?: boolean;
}

/** A source the test drives by hand; it records how each delivery was settled. */
class HandSource<T> implements Source<T> {
  readonly description = 'hand';
  private markReady!: (ctx: SourceContext<T>) => void;
  private readonly ready = new Promise<SourceContext<T>>((resolve) => (this.markReady = resolve));

  async run(ctx: SourceContext<T>): Promise<void> {
    this.markReady(ctx);
    await new Promise<void>((resolve) => {
      if (ctx.signal.aborted) resolve();
      ctx.signal.addEventListener('abort', () => resolve(), { once: true });
    });
  }

  async close(): Promise<void> {}

  async deliver(key: string, body: T, attempt = 1): Promise<Settled> {
    const ctx = await this.ready;
    const settled: Omit<Settled, 'outcome'> = { calls: [] };
    const delivery: Delivery<T> = {
      key,
      body,
      payload: JSON.stringify(body),
      raw: undefined,
      attempt,
      ack: async () => void settled.calls.push('ack'),
      retry: async (_delayMs, reason, attemptSpent) => {
        settled.calls.push('retry');
        settled.reason = reason;
        settled.attemptSpent = attemptSpent ?? true;
      },
      deadLetter: async (reason) => {
        settled.calls.push('deadLetter');
        settled.reason = reason;
      },
      release: async () => void settled.calls.push('release'),
    };
    const outcome = await ctx.deliver(delivery);
    return { ...settled, outcome };
  }
}

interface Message {
  amount: number;
}

/**
 * Where a child process finds the fixture (for the crash case): the fixture module's
 * path and the name it exports the fixture under.
 */
export interface FixtureModule {
  readonly path: string;
  readonly exportName: string;
}

const CRASH_CHILD = fileURLToPath(new URL('./crash-child.ts', import.meta.url));

/**
 * Runs the consumer door's matrix against `fixture`'s data layer; with `module`, also
 * the crash after COMMIT before the ack (a child process SIGKILLed).
 */
export function consumerMatrix<Tx>(fixture: LayerFixture<Tx>, module?: FixtureModule): void {
  describe(`the consumer on ${fixture.name}`, () => {
    let db: LayerDatabase;
    let opened: OpenedLayer<Tx>;
    const running: Consumer[] = [];

    beforeAll(async () => {
      db = await createLayerDatabase(`consumer_${fixture.name}`);
      await migrateOutbox(db.pool);
      opened = await fixture.open(db.url);
    });
    afterAll(async () => {
      await Promise.all(running.map((c) => c.stop({ timeoutMs: 5000 })));
      await opened?.close();
      await db?.close();
    });

    /** A started consumer on the layer; `name` keeps each test's claims apart. */
    async function consumer(
      name: string,
      handler: NonNullable<ConsumerOptions<Message, Tx>['handler']>,
      over: Partial<ConsumerOptions<Message, Tx>> = {},
    ): Promise<HandSource<Message>> {
      const source = new HandSource<Message>();
      const c = createConsumer<Message, Tx>({
        name,
        source,
        pool: db.pool,
        dataLayer: opened.layer,
        handler,
        concurrency: 8,
        maxAttempts: 5,
        ...over,
      });
      running.push(c);
      await c.start();
      return source;
    }

    async function effects(id: string): Promise<Array<{ id: string; amount: number }>> {
      const { rows } = await db.pool.query<{ id: string; amount: number }>(
        `SELECT id, amount FROM ${EFFECTS_TABLE} WHERE id LIKE $1 ORDER BY id`,
        [`${id}%`],
      );
      return rows;
    }

    async function claims(name: string, key: string): Promise<number> {
      const { rows } = await db.pool.query<{ n: number }>(
        'SELECT count(*)::int AS n FROM processed_messages WHERE consumer = $1 AND message_key = $2',
        [name, key],
      );
      return rows[0]!.n;
    }

    const write = (tx: Tx, key: string, amount: number) =>
      opened.insertEffect(tx, { id: key, door: 'consumer', amount });

    it('commits the effect and the claim in one transaction', async () => {
      const source = await consumer('together', async (m, ctx) => write(ctx.tx, ctx.key, m.amount));
      const settled = await source.deliver('together-1', { amount: 3 });
      expect(settled.outcome).toBe('processed');
      expect(settled.calls).toEqual(['ack']);
      const { rows } = await db.pool.query<{ effect: string; claim: string }>(
        `SELECT e.xmin::text AS effect, p.xmin::text AS claim FROM ${EFFECTS_TABLE} e, processed_messages p
          WHERE e.id = 'together-1' AND p.consumer = 'together' AND p.message_key = 'together-1'`,
      );
      expect(rows).toHaveLength(1);
      expect(rows[0]!.effect).toBe(rows[0]!.claim);
      expect((await source.deliver('together-1', { amount: 3 }, 2)).outcome).toBe('duplicate');
      expect(await effects('together-1')).toEqual([{ id: 'together-1', amount: 3 }]);
    });

    it('a handler that throws: nothing applied, redelivered, applied once later', async () => {
      let fail = true;
      const source = await consumer('throws', async (m, ctx) => {
        await write(ctx.tx, ctx.key, m.amount);
        if (fail) throw new Error('downstream said no');
      });
      const first = await source.deliver('throws-1', { amount: 1 });
      expect(first.outcome).toBe('retry');
      expect(first.attemptSpent).toBe(true);
      expect(await effects('throws-1')).toEqual([]);
      expect(await claims('throws', 'throws-1')).toBe(0);
      fail = false;
      expect((await source.deliver('throws-1', { amount: 1 }, 2)).outcome).toBe('processed');
      expect((await source.deliver('throws-1', { amount: 1 }, 3)).outcome).toBe('duplicate');
      expect(await effects('throws-1')).toHaveLength(1);
    });

    it('a rollback of the layer’s own: nothing applied', async () => {
      const source = await consumer('layer-rollback', async (m, ctx) => {
        await write(ctx.tx, ctx.key, m.amount);
        await opened.layerRollback(ctx.tx);
      });
      const settled = await source.deliver('layer-rollback-1', { amount: 1 });
      expect(settled.outcome).toBe('retry');
      expect(await effects('layer-rollback-1')).toEqual([]);
      expect(await claims('layer-rollback', 'layer-rollback-1')).toBe(0);
    });

    it('a deferred constraint failing at COMMIT: a known failure, an attempt spent, nothing applied', async () => {
      const source = await consumer('deferred', async (m, ctx) => write(ctx.tx, ctx.key, m.amount));
      const settled = await source.deliver('deferred-1', { amount: -1 });
      expect(settled.outcome).toBe('retry');
      expect(settled.attemptSpent).toBe(true);
      expect(settled.reason).toBeInstanceOf(CommitFailedError);
      expect(await effects('deferred-1')).toEqual([]);
      expect(await claims('deferred', 'deferred-1')).toBe(0);
    });

    it('a handler timeout: its statement cancelled on the server, nothing applied', async () => {
      const source = await consumer(
        'timeout',
        async (m, ctx) => {
          await write(ctx.tx, ctx.key, m.amount);
          await opened.layer.sql(ctx.tx).query("SELECT pg_sleep(60), 'layer-matrix-sleep'");
        },
        { handlerTimeoutMs: 500 },
      );
      const settled = await source.deliver('timeout-1', { amount: 1 });
      expect(settled.outcome).toBe('retry');
      expect(settled.reason).toBeInstanceOf(HandlerTimeoutError);
      await waitFor(
        async () => {
          const { rows } = await db.pool.query<{ n: number }>(
            "SELECT count(*)::int AS n FROM pg_stat_activity WHERE query LIKE '%layer-matrix-sleep%' AND state = 'active' AND pid <> pg_backend_pid()",
          );
          return rows[0]!.n === 0;
        },
        { timeoutMs: 20_000, what: 'the sleeping statement cancelled' },
      );
      // The claim's row lock is gone with the rollback: a redelivery claims at once.
      expect(await effects('timeout-1')).toEqual([]);
      expect(await claims('timeout', 'timeout-1')).toBe(0);
    });

    it('the connection killed mid-handler: infrastructure, redelivered, applied once', async () => {
      let kill = true;
      const source = await consumer('killed', async (m, ctx) => {
        await write(ctx.tx, ctx.key, m.amount);
        if (kill) {
          kill = false;
          const { rows } = await opened.layer
            .sql(ctx.tx)
            .query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
          await db.pool.query('SELECT pg_terminate_backend($1)', [rows[0]!.pid]);
          await write(ctx.tx, `${ctx.key}-after`, m.amount);
        }
      });
      const first = await source.deliver('killed-1', { amount: 1 });
      expect(first.outcome).toBe('retry');
      expect(first.attemptSpent).toBe(false);
      expect(await effects('killed-1')).toEqual([]);
      const again = await waitForProcessed(() => source.deliver('killed-1', { amount: 1 }, 2));
      expect(again.outcome).toBe('processed');
      expect(await effects('killed-1')).toEqual([{ id: 'killed-1', amount: 1 }]);
    });

    it('concurrent duplicates of one key: one effect', async () => {
      const source = await consumer('duplicates', async (m, ctx) => {
        await write(ctx.tx, ctx.key, m.amount);
        // Long enough for the others to queue on the claim's row lock.
        await opened.layer.sql(ctx.tx).query('SELECT pg_sleep(0.2)::text');
      });
      const results = await Promise.all(
        Array.from({ length: 5 }, () => source.deliver('duplicates-1', { amount: 1 })),
      );
      const outcomes = results.map((r) => r.outcome);
      expect(outcomes.filter((o) => o === 'processed')).toHaveLength(1);
      // The rest are duplicates, or busy claims sent back to be delivered again.
      expect(outcomes.every((o) => o === 'processed' || o === 'duplicate' || o === 'retry')).toBe(
        true,
      );
      expect((await source.deliver('duplicates-1', { amount: 1 }, 2)).outcome).toBe('duplicate');
      expect(await effects('duplicates-1')).toHaveLength(1);
    });

    it('a serialization failure between two writers is run again in place, each effect once', async () => {
      let reads = 0;
      let bothRead!: () => void;
      const barrier = new Promise<void>((resolve) => (bothRead = resolve));
      let runs = 0;
      const source = await consumer(
        'serializable',
        async (m, ctx) => {
          runs++;
          await opened.layer
            .sql(ctx.tx)
            .query(`SELECT count(*) FROM ${EFFECTS_TABLE} WHERE id LIKE 'serializable-%'`);
          // The first two runs read before either writes: a write skew, one must fail.
          if (++reads <= 2) {
            if (reads === 2) bothRead();
            await barrier;
          }
          await write(ctx.tx, ctx.key, m.amount);
        },
        { isolationLevel: 'serializable', serializationRetries: 3 },
      );
      const [a, b] = await Promise.all([
        source.deliver('serializable-a', { amount: 1 }),
        source.deliver('serializable-b', { amount: 1 }),
      ]);
      expect([a.outcome, b.outcome]).toEqual(['processed', 'processed']);
      expect(runs).toBeGreaterThan(2);
      expect(await effects('serializable-')).toHaveLength(2);
    });

    it('batch mode: the batch commits all or nothing', async () => {
      const source = await consumer('batch', async () => undefined, {
        handler: undefined,
        batchHandler: async (items, ctx) => {
          for (const item of items)
            await opened.insertEffect(ctx.tx, {
              id: item.key,
              door: 'consumer',
              amount: item.message.amount,
            });
        },
        batch: { maxSize: 10, maxWaitMs: 200 },
      });
      const good = await Promise.all(
        ['batch-a', 'batch-b', 'batch-c'].map((k) => source.deliver(k, { amount: 1 })),
      );
      expect(good.map((r) => r.outcome)).toEqual(['processed', 'processed', 'processed']);
      const { rows } = await db.pool.query<{ n: number }>(
        `SELECT count(DISTINCT xmin::text)::int AS n FROM ${EFFECTS_TABLE} WHERE id LIKE 'batch-%'`,
      );
      expect(rows[0]!.n).toBe(1);
      // One poison message (fails at COMMIT): the batch is split until it is alone.
      const mixed = await Promise.all(
        [
          ['batch-d', 1],
          ['batch-e', -1],
          ['batch-f', 1],
        ].map(([k, amount]) => source.deliver(k as string, { amount: amount as number })),
      );
      expect(mixed.map((r) => r.outcome)).toEqual(['processed', 'retry', 'processed']);
      expect((await effects('batch-')).map((e) => e.id)).toEqual([
        'batch-a',
        'batch-b',
        'batch-c',
        'batch-d',
        'batch-f',
      ]);
      expect(await claims('batch', 'batch-e')).toBe(0);
    });

    if (module !== undefined)
      it('a crash after COMMIT before the ack: the redelivery finds the key done', async () => {
        const child = spawn(
          process.execPath,
          [
            '--import',
            'tsx',
            CRASH_CHILD,
            db.url,
            module.path,
            module.exportName,
            'crash',
            'crash-1',
          ],
          { stdio: ['ignore', 'pipe', 'inherit'] },
        );
        const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
        const said = await new Promise<string>((resolve) => {
          let out = '';
          child.stdout.on('data', (chunk: Buffer) => {
            out += chunk.toString();
            if (out.includes('\n')) resolve(out.trim());
          });
          void exited.then(() => resolve(out.trim() || 'exited'));
        });
        child.kill('SIGKILL');
        await exited;
        expect(said).toBe('committed');
        const source = await consumer('crash', async (m, ctx) => write(ctx.tx, ctx.key, m.amount));
        expect((await source.deliver('crash-1', { amount: 1 }, 2)).outcome).toBe('duplicate');
        expect(await effects('crash-1')).toEqual([{ id: 'crash-1', amount: 1 }]);
      });

    it('an outbox row enqueued through the layer commits with the effect, not without it', async () => {
      let fail = true;
      const source = await consumer('outbox', async (m, ctx) => {
        await write(ctx.tx, ctx.key, m.amount);
        await enqueue(opened.layer.sql(ctx.tx), {
          destination: 'layer-matrix',
          payload: { key: ctx.key },
        });
        if (fail) throw new Error('after the enqueue');
      });
      const outboxRows = async () =>
        (
          await db.pool.query<{ n: number }>(
            "SELECT count(*)::int AS n FROM eo_outbox WHERE destination = 'layer-matrix'",
          )
        ).rows[0]!.n;
      expect((await source.deliver('outbox-1', { amount: 1 })).outcome).toBe('retry');
      expect(await outboxRows()).toBe(0);
      fail = false;
      expect((await source.deliver('outbox-1', { amount: 1 }, 2)).outcome).toBe('processed');
      expect(await outboxRows()).toBe(1);
      expect(await effects('outbox-1')).toHaveLength(1);
    });
  });
}

/**
 * Delivers again while the consumer sends the delivery back for infrastructure (its
 * database health check may still be catching up with a killed connection).
 */
async function waitForProcessed(deliver: () => Promise<Settled>): Promise<Settled> {
  let last: Settled | undefined;
  await waitFor(
    async () => {
      last = await deliver();
      return last.outcome !== 'retry' || last.attemptSpent !== false;
    },
    { timeoutMs: 30_000, what: 'the redelivery processed' },
  );
  return last!;
}
