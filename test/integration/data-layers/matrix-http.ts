/**
 * The request side's guarantee matrix for one data layer: each layer's test file calls
 * `httpMatrix(fixture)`. Over real HTTP on loopback (the web core through node's
 * listener, one Express and one Fastify case), with the effect written in the layer's
 * own idiom (the fixture's `insertEffect`) inside `ctx.tx`, the layer's transaction:
 * claim, effect, stored answer and outbox rows commit together or not at all, a retry
 * replays without running the handler, and every failure (a throw, the layer's own
 * rollback, a deferred constraint at COMMIT, a timeout, a killed connection) leaves
 * nothing applied and the key free for a retry that applies it once.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import express from 'express';
import Fastify from 'fastify';
import {
  createIdempotency,
  REPLAYED_HEADER,
  toNodeListener,
  webhookSources,
  type Idempotency,
  type IdempotencyContext,
  type IdempotencyOptions,
} from 'effectively-once/http';
import { idempotentExpress } from 'effectively-once/http/express';
import { idempotencyContext, idempotencyPlugin } from 'effectively-once/http/fastify';
import { enqueue, migrateOutbox } from 'effectively-once/outbox';
import { waitFor } from '../../helpers/wait-for.js';
import {
  createLayerDatabase,
  post,
  serve,
  type LayerDatabase,
  type Served,
} from '../http/layer-support.js';
import { portOf } from '../../../kit/payments/payments.js';
import type { DataLayer } from '../../../src/data-layer.js';
import type { LayerFixture, OpenedLayer } from './fixture.js';

/** What one request's handler does inside the layer's transaction. */
type Behaviour<Tx> = (ctx: IdempotencyContext<Tx>) => Promise<Response>;

/** The HTTP door's matrix for `fixture`'s layer (a describe block). */
export function httpMatrix<Tx>(fixture: LayerFixture<Tx>): void {
  describe(`the request side on ${fixture.name}`, () => {
    let db: LayerDatabase;
    let opened: OpenedLayer<Tx>;
    /** Handler runs per idempotency key. */
    const runs = new Map<string, number>();
    /** What the handler does, per key; the default inserts the effect and answers 201. */
    const behaviours = new Map<string, Behaviour<Tx>>();
    const closing: Array<() => Promise<void>> = [];
    /** Transactions the endpoints opened through the layer. */
    let layerTransactions = 0;
    /** The fixture's layer, its transactions counted: proof the door used it. */
    let counted: DataLayer<Tx>;

    beforeAll(async () => {
      db = await createLayerDatabase(`http_${fixture.name}`);
      await migrateOutbox(db.pool);
      opened = await fixture.open(db.url);
      const layer = opened.layer;
      counted = {
        name: layer.name,
        transaction: (settings, body) => {
          layerTransactions++;
          return layer.transaction(settings, body);
        },
        sql: (tx) => layer.sql(tx),
        serverError: (error) => layer.serverError(error),
      };
    });
    afterEach(async () => {
      for (const close of closing.splice(0).reverse()) await close();
    });
    afterAll(async () => {
      await opened?.close();
      await db?.drop();
    });

    const insert = (tx: Tx, id: string, amount = 1): Promise<void> =>
      opened.insertEffect(tx, { id, door: 'http', amount });

    /** Inserts the effect `ctx.key` and answers 201 with it. */
    const applies: Behaviour<Tx> = async (ctx) => {
      await insert(ctx.tx, ctx.key);
      return Response.json({ id: ctx.key }, { status: 201 });
    };

    /** The handler every endpoint runs: counts the run, then the key's behaviour. */
    const handle = (ctx: IdempotencyContext<Tx>): Promise<Response> => {
      runs.set(ctx.key, (runs.get(ctx.key) ?? 0) + 1);
      return (behaviours.get(ctx.key) ?? applies)(ctx);
    };

    function endpoints(options: Partial<IdempotencyOptions<Tx>> = {}): Idempotency<Tx> {
      const idempotency = createIdempotency<Tx>({
        pool: db.pool,
        dataLayer: counted,
        scope: 'matrix',
        ...options,
      });
      closing.push(() => idempotency.close({ timeoutMs: 2000 }));
      return idempotency;
    }

    async function served(idempotency: Idempotency<Tx>): Promise<Served> {
      const server = await serve(
        toNodeListener(idempotency.handler((_request, ctx) => handle(ctx))),
      );
      closing.push(() => server.close());
      return server;
    }

    const send = (server: Served, key: string, body: unknown = { key }) =>
      post(server.url, body, { 'idempotency-key': key });

    async function effects(id: string): Promise<number> {
      const { rows } = await db.pool.query<{ n: string }>(
        'SELECT count(*)::text AS n FROM layer_effects WHERE id = $1',
        [id],
      );
      return Number(rows[0]!.n);
    }

    async function keyRow(
      key: string,
    ): Promise<{ status: number | null; xmin: string } | undefined> {
      const { rows } = await db.pool.query<{ status: number | null; xmin: string }>(
        'SELECT status, xmin::text AS xmin FROM eo_idempotency_keys WHERE idempotency_key = $1',
        [key],
      );
      return rows[0];
    }

    /** The transaction that wrote the effect row `id` (its xmin). */
    async function effectXmin(id: string): Promise<string | undefined> {
      const { rows } = await db.pool.query<{ xmin: string }>(
        'SELECT xmin::text AS xmin FROM layer_effects WHERE id = $1',
        [id],
      );
      return rows[0]?.xmin;
    }

    /** Nothing of `key` committed: no effect, no key row. */
    async function expectNothingApplied(key: string): Promise<void> {
      expect(await effects(key)).toBe(0);
      expect(await keyRow(key)).toBeUndefined();
    }

    /** A retry of `key` with the default handler applies it, once. */
    async function expectRetryAppliesOnce(server: Served, key: string): Promise<void> {
      behaviours.delete(key);
      const before = runs.get(key) ?? 0;
      const retry = await send(server, key);
      expect(retry.status).toBe(201);
      expect(retry.headers.get(REPLAYED_HEADER)).toBeNull();
      expect(runs.get(key)).toBe(before + 1);
      expect(await effects(key)).toBe(1);
      expect((await keyRow(key))?.status).toBe(201);
    }

    it('commits the effect, the claim and the stored answer in one transaction', async () => {
      const server = await served(endpoints());
      const key = randomUUID();
      const opening = layerTransactions;
      const first = await send(server, key);
      expect(first.status).toBe(201);
      expect(first.json).toEqual({ id: key });
      // The claim ran in a transaction the layer opened, not one of the library's pool.
      expect(layerTransactions).toBe(opening + 1);
      const row = await keyRow(key);
      expect(row?.status).toBe(201);
      // One xmin: the effect row and the key row (inserted, then its answer stored) were
      // written by the same transaction, the layer's.
      expect(await effectXmin(key)).toBe(row?.xmin);
    });

    it('replays the stored answer to a retry without running the handler', async () => {
      const server = await served(endpoints());
      const key = randomUUID();
      const first = await send(server, key);
      const again = await send(server, key);
      expect(again.status).toBe(201);
      expect(again.json).toEqual(first.json);
      expect(again.headers.get(REPLAYED_HEADER)).toBe('true');
      expect(runs.get(key)).toBe(1);
      expect(await effects(key)).toBe(1);
      // The replay's own layer transaction (it read the row, wrote nothing) is rolled back
      // after the answer, not left open holding a connection.
      await waitFor(
        async () => {
          const { rows } = await db.pool.query(
            "SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND state LIKE 'idle in transaction%'",
          );
          return rows.length === 0;
        },
        { what: "the replay's transaction to end" },
      );
    });

    it('rolls back a handler that throws: no answer stored, and the retry runs it', async () => {
      const server = await served(endpoints());
      const key = randomUUID();
      behaviours.set(key, async (ctx) => {
        await insert(ctx.tx, ctx.key);
        throw new Error('the handler failed after its write');
      });
      const failed = await send(server, key);
      expect(failed.status).toBe(500);
      await expectNothingApplied(key);
      await expectRetryAppliesOnce(server, key);
    });

    it("rolls back the layer's own rollback: nothing applied, and the retry runs it", async () => {
      const server = await served(endpoints());
      const key = randomUUID();
      behaviours.set(key, async (ctx) => {
        await insert(ctx.tx, ctx.key);
        return opened.layerRollback(ctx.tx);
      });
      const failed = await send(server, key);
      expect(failed.status).toBeGreaterThanOrEqual(500);
      expect(failed.headers.get(REPLAYED_HEADER)).toBeNull();
      await expectNothingApplied(key);
      await expectRetryAppliesOnce(server, key);
    });

    it('answers a deferred constraint failing at COMMIT as a known rollback', async () => {
      const server = await served(endpoints());
      const key = randomUUID();
      behaviours.set(key, async (ctx) => {
        await insert(ctx.tx, ctx.key, -1);
        return Response.json({ id: ctx.key }, { status: 201 });
      });
      const failed = await send(server, key);
      // Known: the server refused the COMMIT, so nothing committed (not "outcome unknown").
      expect(failed.status).toBe(500);
      expect(failed.json).toMatchObject({ code: 'EO_COMMIT_FAILED' });
      await expectNothingApplied(key);
      await expectRetryAppliesOnce(server, key);
    });

    it("cancels a timed-out handler's statement: nothing applied", async () => {
      const server = await served(endpoints({ handlerTimeoutMs: 1000 }));
      const key = randomUUID();
      let sleepEnded: 'resolved' | 'rejected' | undefined;
      behaviours.set(key, async (ctx) => {
        await insert(ctx.tx, ctx.key);
        // Through the layer's own connection, in its transaction: far past the timeout.
        await opened.layer
          .sql(ctx.tx)
          .query(`SELECT pg_sleep(60) AS "${key}"`)
          .then(
            () => (sleepEnded = 'resolved'),
            (error: unknown) => {
              sleepEnded = 'rejected';
              throw error;
            },
          );
        return Response.json({ id: ctx.key }, { status: 201 });
      });
      const timedOut = await send(server, key);
      expect(timedOut.status).toBe(503);
      expect(timedOut.headers.get('retry-after')).not.toBeNull();
      // The statement was cancelled on the server, not left to run its minute out.
      expect(await waitFor(() => sleepEnded, { what: "the handler's statement to end" })).toBe(
        'rejected',
      );
      await waitFor(
        async () => {
          const { rows } = await db.pool.query(
            "SELECT 1 FROM pg_stat_activity WHERE state = 'active' AND query LIKE $1",
            [`%pg_sleep(60) AS "${key}"%`],
          );
          return rows.length === 0;
        },
        { what: 'the statement to leave pg_stat_activity' },
      );
      await expectNothingApplied(key);
      await expectRetryAppliesOnce(server, key);
    });

    it('answers retry when the connection is killed mid-handler, and the retry applies once', async () => {
      const server = await served(endpoints());
      const key = randomUUID();
      behaviours.set(key, async (ctx) => {
        await insert(ctx.tx, ctx.key);
        const { rows } = await opened.layer
          .sql(ctx.tx)
          .query<{ pid: string }>('SELECT pg_backend_pid()::text AS pid');
        // Another connection ends the transaction's backend, as a crash or a DBA would.
        await db.pool.query('SELECT pg_terminate_backend($1::int)', [rows[0]!.pid]);
        return Response.json({ id: ctx.key }, { status: 201 });
      });
      const lost = await send(server, key);
      expect(lost.status).toBe(503);
      expect(lost.headers.get('retry-after')).not.toBeNull();
      await expectNothingApplied(key);
      await expectRetryAppliesOnce(server, key);
    });

    it('runs concurrent duplicates once: the others wait, then replay', async () => {
      // Two endpoint families on one table, as two instances: one's duplicates wait in
      // memory behind its own claim, the other's on the key's row lock in the database.
      const here = await served(endpoints());
      const there = await served(endpoints());
      const key = randomUUID();
      let release!: () => void;
      const gate = new Promise<void>((resolve) => (release = resolve));
      behaviours.set(key, async (ctx) => {
        await insert(ctx.tx, ctx.key);
        await gate;
        return Response.json({ id: ctx.key }, { status: 201 });
      });
      const first = send(here, key);
      await waitFor(() => runs.get(key) === 1, { what: 'the first run' });
      const others = [send(here, key), send(here, key), send(there, key), send(there, key)];
      // The other instance's claims wait on the row lock the first one holds.
      await waitFor(
        async () => {
          const { rows } = await db.pool.query<{ n: string }>(
            "SELECT count(*)::text AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()",
          );
          return Number(rows[0]!.n) >= 1;
        },
        { what: "a duplicate's claim waiting on the key" },
      );
      release();
      const answers = await Promise.all([first, ...others]);
      for (const answer of answers) {
        expect(answer.status).toBe(201);
        expect(answer.json).toEqual({ id: key });
      }
      expect(answers.filter((a) => a.headers.get(REPLAYED_HEADER) === 'true')).toHaveLength(4);
      expect(runs.get(key)).toBe(1);
      expect(await effects(key)).toBe(1);
    });

    it("answers 409 to a duplicate while the original runs, with concurrent: 'reject'", async () => {
      const original = await served(endpoints());
      const rejecting = await served(endpoints({ concurrent: 'reject' }));
      const key = randomUUID();
      let release!: () => void;
      const gate = new Promise<void>((resolve) => (release = resolve));
      behaviours.set(key, async (ctx) => {
        await insert(ctx.tx, ctx.key);
        await gate;
        return Response.json({ id: ctx.key }, { status: 201 });
      });
      const first = send(original, key);
      await waitFor(() => runs.get(key) === 1, { what: 'the first run' });
      const busy = await send(rejecting, key);
      expect(busy.status).toBe(409);
      release();
      expect((await first).status).toBe(201);
      expect(runs.get(key)).toBe(1);
      expect(await effects(key)).toBe(1);
    });

    it('receives a webhook on the layer: applied once, the redelivery replayed', async () => {
      const idempotency = endpoints();
      const server = await serve(
        toNodeListener(
          idempotency.webhook(
            { source: webhookSources.github, verify: false },
            async (_request, ctx) => {
              runs.set(ctx.key, (runs.get(ctx.key) ?? 0) + 1);
              await insert(ctx.tx, delivery);
            },
          ),
        ),
      );
      closing.push(() => server.close());
      const delivery = randomUUID();
      const deliver = () =>
        post(server.url, { action: 'created' }, { 'x-github-delivery': delivery });
      const first = await deliver();
      expect(first.status).toBe(204);
      const again = await deliver();
      expect(again.status).toBe(204);
      expect(again.headers.get(REPLAYED_HEADER)).toBe('true');
      expect([...runs.entries()].filter(([k]) => k.includes(delivery))).toEqual([
        [expect.stringContaining(delivery), 1],
      ]);
      expect(await effects(delivery)).toBe(1);
    });

    it('commits an outbox row enqueued through the layer with the effect, or neither', async () => {
      const server = await served(endpoints());
      const key = randomUUID();
      const outboxRows = async (id: string) =>
        (
          await db.pool.query<{ xmin: string }>(
            "SELECT xmin::text AS xmin FROM eo_outbox WHERE payload = convert_to($1, 'UTF8')",
            [JSON.stringify({ id })],
          )
        ).rows;
      const enqueues =
        (fail: boolean): Behaviour<Tx> =>
        async (ctx) => {
          await insert(ctx.tx, ctx.key);
          await enqueue(opened.layer.sql(ctx.tx), {
            destination: 'orders',
            payload: { id: ctx.key },
            orderingKey: ctx.key,
          });
          if (fail) throw new Error('failed after enqueueing');
          return Response.json({ id: ctx.key }, { status: 201 });
        };
      behaviours.set(key, enqueues(true));
      expect((await send(server, key)).status).toBe(500);
      expect(await outboxRows(key)).toHaveLength(0);
      await expectNothingApplied(key);
      behaviours.set(key, enqueues(false));
      expect((await send(server, key)).status).toBe(201);
      const rows = await outboxRows(key);
      expect(rows).toHaveLength(1);
      expect(rows[0]!.xmin).toBe(await effectXmin(key));
      expect(rows[0]!.xmin).toBe((await keyRow(key))?.xmin);
    });

    it('runs an Express handler in the layer transaction, then replays it', async () => {
      const idempotency = endpoints();
      const app = express();
      app.post(
        '/charges',
        idempotentExpress(idempotency, async (_req, res, ctx) => {
          runs.set(ctx.key, (runs.get(ctx.key) ?? 0) + 1);
          await insert(ctx.tx, ctx.key);
          res.status(201).json({ id: ctx.key, via: 'express' });
        }),
      );
      const server = await serve(app);
      closing.push(() => server.close());
      const key = randomUUID();
      const url = `${server.url}/charges`;
      const first = await post(url, { key }, { 'idempotency-key': key });
      expect(first.status).toBe(201);
      expect(first.json).toEqual({ id: key, via: 'express' });
      expect(await effectXmin(key)).toBe((await keyRow(key))?.xmin);
      const again = await post(url, { key }, { 'idempotency-key': key });
      expect(again.headers.get(REPLAYED_HEADER)).toBe('true');
      expect(again.json).toEqual(first.json);
      expect(runs.get(key)).toBe(1);
      expect(await effects(key)).toBe(1);
    });

    it('runs a Fastify route in the layer transaction, then replays it', async () => {
      const idempotency = endpoints();
      const app = Fastify();
      await app.register(idempotencyPlugin, { idempotency });
      app.post('/charges', async (request, reply) => {
        const ctx = idempotencyContext(request, idempotency);
        runs.set(ctx.key, (runs.get(ctx.key) ?? 0) + 1);
        await insert(ctx.tx, ctx.key);
        return reply.code(201).send({ id: ctx.key, via: 'fastify' });
      });
      await app.listen({ port: 0, host: '127.0.0.1' });
      closing.push(async () => {
        app.server.closeAllConnections();
        await app.close();
      });
      const key = randomUUID();
      const url = `http://127.0.0.1:${portOf(app.server.address())}/charges`;
      const first = await post(url, { key }, { 'idempotency-key': key });
      expect(first.status).toBe(201);
      expect(first.json).toEqual({ id: key, via: 'fastify' });
      expect(await effectXmin(key)).toBe((await keyRow(key))?.xmin);
      const again = await post(url, { key }, { 'idempotency-key': key });
      expect(again.headers.get(REPLAYED_HEADER)).toBe('true');
      expect(again.json).toEqual(first.json);
      expect(runs.get(key)).toBe(1);
      expect(await effects(key)).toBe(1);
    });
  });
}
