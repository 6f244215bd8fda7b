/** Steps on Express: a flow as an Express route handler, over the web core's `idempotency.steps`. */
import type { NextFunction, Request, RequestHandler, Response } from 'express';

import {
  stepsRoute,
  type Flow,
  type Idempotency,
  type StepsRouteOptions,
} from '../../src/http/framework-kit.js';

/**
 * An Express 5 route that runs `flow` under the request's Idempotency-Key (see
 * `Idempotency.steps`): the flow's input is the parsed JSON body by default, the
 * answer its final (stored, replayed) answer. Mount it without a body parser in front,
 * or after `express.raw()`; a body `express.json()` already parsed is re-serialised
 * for the fingerprint (then give the endpoint `fingerprint: 'json'`).
 *
 * ```ts
 * app.post('/charges', stepsExpress(idempotency, charge));
 * ```
 */
export function stepsExpress<I>(
  idempotency: Pick<Idempotency<unknown>, 'steps'>,
  flow: Flow<I>,
  options: StepsRouteOptions<I> = {},
): RequestHandler {
  const route = stepsRoute(idempotency, flow, options);
  return (req: Request, res: Response, next: NextFunction): void => {
    const { protocol, originalUrl: url, method, headers } = req;
    void route({ protocol, host: req.get('host'), url, method, headers, body: bodyOf(req) }).then(
      (answer) => {
        res.status(answer.status);
        for (const [name, value] of Object.entries(answer.headers))
          if (value !== undefined) res.setHeader(name, value);
        res.end(answer.body);
      },
      (error: unknown) => next(error),
    );
  };
}

/** The request's body as bytes a web Request can carry: the stream, or what a parser left. */
function bodyOf(req: Request): Uint8Array | Request {
  const parsed: unknown = (req as { body?: unknown }).body;
  if (Buffer.isBuffer(parsed)) return parsed;
  if (typeof parsed === 'string') return Buffer.from(parsed, 'utf8');
  if (parsed !== undefined && req.readableEnded) return Buffer.from(JSON.stringify(parsed), 'utf8');
  return req;
}
