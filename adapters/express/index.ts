/**
 * `effectively-once/http/express`: Idempotency-Key endpoints and webhook receivers for
 * Express 5, thin over `effectively-once/http`. The handler writes to `res` as usual;
 * what it writes is held back (bounded memory, then a temporary file), stored with the
 * effect, committed, then sent. `express` 5 and `@types/express` are optional peer
 * dependencies.
 * @packageDocumentation
 * @module effectively-once/http/express
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { Readable } from 'node:stream';
import type { PoolClient } from 'pg';
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import {
  checkWebhookOptions,
  ConfigurationError,
  declaredBody,
  decodeRequest,
  HandlerRun,
  HeldResponse,
  hooksOf,
  knownBytes,
  nodeHeaders,
  requestUrl,
  restoreHeaders,
  snapshotHeaders,
  webRequest,
  withoutEncoding,
  type Execution,
  type HeaderSnapshot,
  type Idempotency,
  type IdempotencyContext,
  type RequestOverrides,
  type WebhookOptions,
} from '../../src/http/framework-kit.js';
import { ignoreConditionals } from './conditionals.js';
import { nextFor, PassedOn } from './next.js';

/**
 * An Express handler run inside the key's transaction: write the effect through
 * `ctx.tx`, answer with `res` as usual (`res.status(201).json(…)`, `res.write` …
 * `res.end()`, `stream.pipe(res)`, `res.sendFile`). Its work is done when its promise
 * settles with `res.end()` called (a handler that returns no promise: at `res.end()`);
 * then `ctx.tx` is revoked, the transaction commits, and only then does anything reach
 * the client. `req.body` is the parsed body (JSON, form or text; otherwise a Buffer):
 * do not mount a body parser before it, the adapter needs the raw bytes. Throwing (or
 * rejecting) before its work is done rolls back and passes the error to Express, even
 * after `res.json()`; so does handing the request to `req.next` (as `res.sendFile`
 * without a callback does on a missing file): the next handler answers, unstored. A
 * 5xx rolls back and is sent unstored.
 */
export type ExpressIdempotentHandler<Tx = PoolClient> = (
  req: Request,
  res: Response,
  ctx: IdempotencyContext<Tx>,
) => void | Promise<void>;

/** Options of {@link idempotentExpress}. */
export interface ExpressIdempotentOptions {
  /** The key's scope from the Express request (`req.user.tenantId`), instead of the endpoint's `scope`. */
  scope?: (req: Request) => string | Promise<string>;
  /** The route, instead of the endpoint's `route` (default: the URL's path). */
  route?: (req: Request) => string;
  /** Receive a webhook instead: key on the sender's delivery id. */
  webhook?: WebhookOptions;
}

/**
 * Wraps an Express 5 handler into an idempotent one: the key is claimed, the handler
 * runs in its transaction, and the response it writes is stored, committed, then sent.
 * A retry gets the stored response with `Idempotent-Replayed: true`. `ctx.tx` is typed
 * by the endpoint family's data layer (`createIdempotency({ dataLayer })`), a pg client
 * without one.
 *
 * ```ts
 * app.post('/charges', idempotentExpress(idempotency, async (req, res, { tx }) => {
 *   const { rows } = await tx.query('INSERT INTO charges … RETURNING id', […]);
 *   res.status(201).location(`/charges/${rows[0].id}`).json(rows[0]);
 * }));
 * ```
 */
export function idempotentExpress<Tx = PoolClient>(
  idempotency: Idempotency<Tx>,
  handler: ExpressIdempotentHandler<Tx>,
  options: ExpressIdempotentOptions = {},
): RequestHandler {
  if (typeof handler !== 'function')
    throw new ConfigurationError('handler', 'must be a function (req, res, ctx)');
  if (options.webhook !== undefined) checkWebhookOptions(options.webhook);
  return (req: Request, res: Response, next: NextFunction): void => {
    void run(idempotency, handler, options, req, res).then(
      (error) => {
        if (error instanceof PassedOn) error.handOn();
        else if (error !== undefined) next(withStatus(error));
      },
      (error: unknown) => next(withStatus(error)),
    );
  };
}

/**
 * The webhook receiver on Express: `verify` (on the raw body), then the delivery is
 * claimed on its id and `handler` applies it once. Answer with `res` (a 2xx is stored
 * and replayed to redeliveries).
 */
export function expressWebhook<Tx = PoolClient>(
  idempotency: Idempotency<Tx>,
  webhook: WebhookOptions,
  handler: ExpressIdempotentHandler<Tx>,
): RequestHandler {
  return idempotentExpress(idempotency, handler, { webhook });
}

/** Runs one request; resolves with an error for Express's `next`, if any. */
async function run<Tx>(
  idempotency: Idempotency<Tx>,
  handler: ExpressIdempotentHandler<Tx>,
  options: ExpressIdempotentOptions,
  req: Request,
  res: Response,
): Promise<unknown> {
  if (bodyAlreadyRead(req))
    return new ConfigurationError(
      'idempotentExpress',
      'the request body was already read by a body parser; mount idempotentExpress before ' +
        'express.json() and the like (it parses the body itself), or use express.raw()',
    );
  const overrides: RequestOverrides = {};
  if (options.scope !== undefined) overrides.scope = await options.scope(req);
  if (options.route !== undefined) overrides.route = options.route(req);
  else {
    // Telemetry's name for the endpoint: the mounted template, never the path (ids).
    const template: unknown = (req.route as { path?: unknown } | undefined)?.path;
    if (typeof template === 'string') overrides.routeTemplate = req.baseUrl + template;
  }
  if (options.webhook !== undefined) overrides.webhook = options.webhook;
  // The body as Express's parsers read it: decoded per Content-Encoding (express.raw()
  // has decoded a Buffer body already), so the fingerprint is over the decoded body.
  let decoded: { headers: IncomingHttpHeaders; body: Readable | Buffer };
  try {
    decoded = Buffer.isBuffer(req.body)
      ? { headers: withoutEncoding(req.headers), body: req.body }
      : decodeRequest(req.headers, req);
  } catch (error) {
    return error;
  }
  const request = webRequest(
    requestUrl(req.protocol, req.get('host'), req.originalUrl),
    req.method,
    decoded.headers,
    decoded.body,
  );
  const snapshot = snapshotHeaders(res);
  // The latest run's held `res` (a serialization failure runs the handler again).
  const latest: { held?: HeldResponse } = {};
  // The stored answer must not depend on Range or conditional headers (a 206, a 304).
  const restoreConditionals = ignoreConditionals(req, res);
  // The router's `next`, held for each run (see express-next.ts) and put back after.
  const realNext = req.next;
  const execution = await idempotency
    .execute(
      request,
      async (_request, ctx) => {
        // An earlier run's answer is void: its transaction rolled back.
        latest.held?.release();
        latest.held?.body.discard();
        restoreHeaders(res, snapshot);
        req.body = parseBody(ctx.body, req.get('content-type'));
        const hooks = hooksOf(ctx);
        // Express's rule: the work is done when the handler settled and called res.end().
        const run = new HandlerRun<true>({ returned: () => 'wait', workDone: hooks.workDone });
        const held = new HeldResponse(res, hooks.maxBodyBytes, run);
        latest.held = held;
        if (realNext !== undefined) req.next = nextFor(run, realNext);
        const outcome = await run.start(() => handler(req, res, ctx)).done;
        if (outcome.kind === 'threw') throw outcome.error;
        return held.response();
      },
      overrides,
    )
    .finally(() => {
      restoreConditionals();
      req.next = realNext;
    });
  return answer(execution, latest.held, res, snapshot);
}

/**
 * Sends what the request ended with, or hands Express the handler's error. The one
 * place the held `res` is released: after the verified COMMIT (or the rollback).
 */
async function answer(
  execution: Execution,
  held: HeldResponse | undefined,
  res: Response,
  snapshot: HeaderSnapshot,
): Promise<unknown> {
  held?.release();
  // The handler's own answer (committed, or a 5xx rolled back): what it wrote, held.
  if (
    held !== undefined &&
    execution.kind === 'response' &&
    declaredBody(execution.response) === held.body
  ) {
    // What was stored: the head as frozen at the answer, not what `res` says since.
    held.restoreHead();
    await held.body.sendTo(res);
    return undefined;
  }
  held?.body.discard();
  restoreHeaders(res, snapshot);
  if (execution.kind === 'threw') return execution.error;
  // The library's answer (a replay, a problem): bytes in hand, then sent in one call, so
  // a handler abandoned on timeout cannot interleave anything.
  const { response } = execution;
  const bytes = knownBytes(response) ?? new Uint8Array(await response.arrayBuffer());
  restoreHeaders(res, snapshot);
  res.statusCode = response.status;
  for (const [name, value] of Object.entries(nodeHeaders(response)))
    if (value !== undefined) res.setHeader(name, value);
  if (held !== undefined) held.endWith(bytes);
  else res.end(bytes);
  return undefined;
}

function bodyAlreadyRead(req: Request): boolean {
  if (Buffer.isBuffer(req.body)) return false;
  return (req as { _body?: unknown })._body === true || req.readableEnded;
}

/**
 * The error Express's handler should see: a decoding failure carries its 400 `status`
 * (request-encoding.ts), but Node 24's web stream hands the reader a TypeError whose
 * `cause` is that error, and Express would answer the wrapper 500.
 */
function withStatus(error: unknown): unknown {
  if (typeof error !== 'object' || error === null || 'status' in error) return error;
  const cause = (error as { cause?: unknown }).cause;
  if (typeof cause === 'object' && cause !== null && 'status' in cause) return cause;
  return error;
}

/** What Express's body parsers would have made of the bytes. */
function parseBody(bytes: Uint8Array, contentType: string | undefined): unknown {
  if (bytes.byteLength === 0) return undefined;
  const type = contentType?.split(';')[0]?.trim().toLowerCase() ?? '';
  const buffer = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (type === 'application/json' || type.endsWith('+json')) {
    try {
      return JSON.parse(buffer.toString('utf8')) as unknown;
    } catch (cause) {
      // Express's error handler answers `status`: a 400, as express.json() would.
      throw Object.assign(new SyntaxError('the request body is not valid JSON', { cause }), {
        status: 400,
        expose: true,
      });
    }
  }
  if (type === 'application/x-www-form-urlencoded')
    return Object.fromEntries(new URLSearchParams(buffer.toString('utf8')));
  if (type.startsWith('text/')) return buffer.toString('utf8');
  return buffer;
}
export { stepsExpress } from './steps.js';
