import type { Express, NextFunction, Request, Response } from 'express';
import type { Idempotency } from 'effectively-once/http';
import { idempotentExpress } from 'effectively-once/http/express';
import { STREAM_LINES, type HttpFaultKind } from './fault-plan.js';
import { ANSWER_HEADER, answerOf, opOf, type FaultSide } from './fault-side.js';
import type { FaultEndpoints } from './fault-endpoints.js';

/** The fault routes on Express 5 (`/express/<kind>`), through idempotentExpress. */
export function expressFaultRoutes(app: Express, e: FaultEndpoints, side: FaultSide): void {
  // Streams its answer: headers flushed first, then (the export's first page computed)
  // the effect and more writes through ctx.tx, the body written as it comes.
  app.post(
    '/express/stream',
    idempotentExpress(e.main, async (req, res, ctx) => {
      const { op, spec } = opOf(req.get('x-chaos-op'), req.body);
      const run = await side.begin();
      await side.failCommit(ctx, op, run, spec.fires);
      res.status(200).type('text/plain').set(ANSWER_HEADER, `${op} ${run}`);
      res.flushHeaders();
      await yieldOnce();
      await side.effect(ctx, op, run, 'main');
      res.write(`op=${op} run=${run}\n`);
      for (let i = 0; i < STREAM_LINES; i++) {
        const { rows } = await ctx.tx.query<{ i: number }>('SELECT $1::int AS i', [i]);
        res.write(`line ${rows[0]?.i}\n`);
      }
      await side.effect(ctx, op, run, 'tail');
      res.end('end\n');
    }),
  );
  // Answers, then throws (its first runs), or goes on after answering (a log line
  // flushed) and writes through ctx.tx.
  app.post(
    '/express/throw-after',
    idempotentExpress(e.main, async (req, res, ctx) => {
      const { op, spec } = opOf(req.get('x-chaos-op'), req.body);
      const run = await side.begin();
      await side.effect(ctx, op, run, 'main');
      if (spec.variant === 'write') await side.failCommit(ctx, op, run, spec.fires);
      res
        .status(201)
        .set(ANSWER_HEADER, `${op} ${run}`)
        .json(answerOf(op, run, ctx));
      if (spec.variant === 'throw') {
        if (await side.fires(op, run, 'throw-after/throw', spec.fires))
          throw new Error('failed after answering');
        return;
      }
      await yieldOnce();
      await side.effect(ctx, op, run, 'after-answer');
    }),
  );
  const plain = (path: string, idempotency: Idempotency, kind?: HttpFaultKind): void => {
    app.post(
      path,
      idempotentExpress(
        idempotency,
        async (req, res, ctx) => {
          const request = opOf(req.get('x-chaos-op'), req.body);
          const run = await side.begin();
          await side.body(ctx, request, run, req);
          res
            .status(kind === 'webhook-scope' ? 200 : 201)
            .set(ANSWER_HEADER, `${request.op} ${run}`)
            .json(answerOf(request.op, run, ctx));
        },
        kind === 'webhook-scope'
          ? { webhook: e.webhook, scope: (req: Request) => req.get('x-tenant') ?? 't0' }
          : {},
      ),
    );
  };
  for (const kind of ['deferred', 'backend-killed', 'ignore-signal', 'floating'] as const)
    plain(`/express/${kind}`, e.main, kind);
  plain('/express/saturated-pool', e.saturated);
  plain('/express/hooks', e.main, 'webhook-scope');
  plain('/express/long/alpha', e.alpha);
  plain('/express/long/bravo', e.bravo);
  // Errors the adapter passes on (a handler's throw): a 500 the caller retries.
  app.use((error: unknown, _req: Request, res: Response, next: NextFunction) => {
    if (res.headersSent) return next(error);
    res.status(500).json({ error: error instanceof Error ? error.message : String(error) });
  });
}

/** Lets whatever the answer set going run first, as any await on I/O would. */
function yieldOnce(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
