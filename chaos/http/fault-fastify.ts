import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { IdempotencyContext } from 'effectively-once/http';
import { idempotencyPlugin } from 'effectively-once/http/fastify';
import type { FaultEndpoints } from './fault-endpoints.js';
import { ANSWER_HEADER, answerOf, opOf, type FaultSide } from './fault-side.js';

/** How long a `tx-first` callback handler's query keeps running after it answered. */
const LINGER_S = 0.2;

/**
 * The fault routes on Fastify 5 (`/fastify/<kind>`), through idempotencyPlugin with
 * the `main` endpoint, scoped by `x-tenant` (webhooks too: per tenant, by the adapter).
 */
export async function fastifyFaultRoutes(
  app: FastifyInstance,
  e: FaultEndpoints,
  side: FaultSide,
): Promise<void> {
  await app.register(idempotencyPlugin, {
    idempotency: e.main,
    scope: (request) => tenantOf(request),
  });
  // Not async: answers later from a callback, as Fastify allows.
  app.post('/fastify/callback', function (request, reply) {
    const ctx = contextOf(request);
    const { op, spec } = opOf(request.headers['x-chaos-op'], request.body);
    const send = (run: number): void => {
      void reply
        .code(201)
        .header(ANSWER_HEADER, `${op} ${run}`)
        .send(answerOf(op, run, ctx));
    };
    const failed = (error: unknown): void => void reply.send(error);
    if (spec.variant === 'tx-first') {
      // Its ctx.tx work starts at once: the effect, and a slow query it answers without
      // waiting for (an audit write, a cache refresh), both before it returns.
      const inserted = ctx.tx.query<{ run: string }>(
        `INSERT INTO ${side.effectsTable} (op, run, part, tenant) VALUES ($1, ${side.nextRunSql}, 'main', $2) RETURNING run::text`,
        [op, ctx.scope],
      );
      ctx.tx.query(`SELECT pg_sleep(${LINGER_S})`).catch(() => undefined);
      inserted.then(({ rows }) => send(Number(rows[0]?.run))).catch(failed);
      return;
    }
    // Asks another connection first (a run id), then writes and fails its first COMMIT.
    side
      .begin()
      .then(async (run) => {
        await side.effect(ctx, op, run, 'main');
        await side.failCommit(ctx, op, run, spec.fires);
        send(run);
      })
      .catch(failed);
  });
  const plain = async (request: FastifyRequest, reply: FastifyReply): Promise<object> => {
    const ctx = contextOf(request);
    const req = opOf(request.headers['x-chaos-op'], request.body);
    const run = await side.begin();
    await side.body(ctx, req, run, request.raw);
    void reply
      .code(req.spec.kind === 'webhook-scope' ? 200 : 201)
      .header(ANSWER_HEADER, `${req.op} ${run}`);
    return answerOf(req.op, run, ctx);
  };
  for (const kind of ['deferred', 'backend-killed', 'ignore-signal', 'floating'])
    app.post(`/fastify/${kind}`, plain);
  app.post('/fastify/hooks', { config: { idempotency: { webhook: e.webhook } } }, plain);
}

function contextOf(request: FastifyRequest): IdempotencyContext {
  const ctx = request.idempotency;
  if (ctx === null) throw new Error('not an idempotent route');
  return ctx;
}

function tenantOf(request: FastifyRequest): string {
  const tenant = request.headers['x-tenant'];
  return typeof tenant === 'string' ? tenant : 't0';
}
