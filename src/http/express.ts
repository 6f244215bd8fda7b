/**
 * effectively-once/http/express: Idempotency-Key endpoints and webhook receivers for
 * Express 5, thin over effectively-once/http. The handler writes to `res` as usual;
 * what it writes is held back, stored with the effect, committed, then sent.
 */
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { ConfigurationError } from '../errors.js';
import type { IdempotencyContext } from './context.js';
import type { Idempotency, RequestOverrides } from './idempotency.js';
import {
  nodeHeaders,
  requestUrl,
  restoreHeaders,
  sendResponse,
  snapshotHeaders,
  webRequest,
} from './node-bridge.js';
import { checkWebhookOptions, type WebhookOptions } from './webhooks.js';

/**
 * An Express handler run inside the key's transaction: write the effect through
 * `ctx.tx`, answer with `res` as usual (`res.status(201).json(…)`). `req.body` is the
 * parsed body (JSON, form or text; otherwise a Buffer): do not mount a body parser
 * before it, the adapter needs the raw bytes. Throwing (or rejecting) rolls back and
 * passes the error to Express; a 5xx rolls back and is sent unstored.
 */
export type ExpressIdempotentHandler = (
  req: Request,
  res: Response,
  ctx: IdempotencyContext,
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
 * A retry gets the stored response with `Idempotent-Replayed: true`.
 *
 * ```ts
 * app.post('/charges', idempotentExpress(idempotency, async (req, res, { tx }) => {
 *   const { rows } = await tx.query('INSERT INTO charges … RETURNING id', […]);
 *   res.status(201).location(`/charges/${rows[0].id}`).json(rows[0]);
 * }));
 * ```
 */
export function idempotentExpress(
  idempotency: Idempotency,
  handler: ExpressIdempotentHandler,
  options: ExpressIdempotentOptions = {},
): RequestHandler {
  if (typeof handler !== 'function')
    throw new ConfigurationError('handler', 'must be a function (req, res, ctx)');
  if (options.webhook !== undefined) checkWebhookOptions(options.webhook);
  return (req: Request, res: Response, next: NextFunction): void => {
    void run(idempotency, handler, options, req, res).then(
      (error) => {
        if (error !== undefined) next(error);
      },
      (error: unknown) => next(error),
    );
  };
}

/**
 * The webhook receiver on Express: `verify` (on the raw body), then the delivery is
 * claimed on its id and `handler` applies it once. Answer with `res` (a 2xx is stored
 * and replayed to redeliveries).
 */
export function expressWebhook(
  idempotency: Idempotency,
  webhook: WebhookOptions,
  handler: ExpressIdempotentHandler,
): RequestHandler {
  return idempotentExpress(idempotency, handler, { webhook });
}

/** Runs one request; resolves with an error for Express's `next`, if any. */
async function run(
  idempotency: Idempotency,
  handler: ExpressIdempotentHandler,
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
  if (options.webhook !== undefined) overrides.webhook = options.webhook;
  const request = webRequest(
    requestUrl(req.protocol, req.get('host'), req.originalUrl),
    req.method,
    req.headers,
    Buffer.isBuffer(req.body) ? req.body : req,
  );
  const snapshot = snapshotHeaders(res);
  let held: HeldResponse | undefined;
  const execution = await idempotency.execute(
    request,
    async (_request, ctx) => {
      held?.discard();
      // A run after a serialization failure starts from the headers the request came with.
      restoreHeaders(res, snapshot);
      req.body = parseBody(ctx.body, req.get('content-type'));
      held = new HeldResponse(res, ctx, () => handler(req, res, ctx));
      const ran = await held.ran;
      if (ran.kind === 'threw') throw ran.error;
      return ran.response;
    },
    overrides,
  );
  const streamed =
    execution.kind === 'response' && execution.outcome === 'executed' && held?.streaming === true;
  if (!streamed) held?.discard();
  restoreHeaders(res, snapshot);
  if (execution.kind === 'threw') return execution.error;
  if (streamed && held !== undefined) {
    for (const [name, value] of Object.entries(nodeHeaders(execution.response)))
      if (value !== undefined) res.setHeader(name, value);
    await held.send(execution.response);
  } else await sendResponse(execution.response, res);
  return undefined;
}

function bodyAlreadyRead(req: Request): boolean {
  if (Buffer.isBuffer(req.body)) return false;
  return (req as { _body?: unknown })._body === true || req.readableEnded;
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

type Callback = (error?: Error | null) => void;
type Method = (...args: unknown[]) => unknown;
type Held = 'writeHead' | 'write' | 'end' | 'flushHeaders';
/** How the handler's run ended: a response, or what it threw. */
type Ran = { kind: 'response'; response: globalThis.Response } | { kind: 'threw'; error: unknown };
type WriteArgs = [chunk?: unknown, encoding?: unknown, callback?: unknown];

/**
 * The handler's `res`, held back: writeHead/write/end are recorded, not sent. Once the
 * handler ended it, {@link ran} resolves with the web Response to store. A
 * handler that calls `res.flushHeaders()` streams instead: the Response resolves at
 * once (marked `ctx.streamed`), and what it writes after is queued until COMMIT, then
 * {@link send} forwards it with the real methods as it comes, nothing of it stored.
 */
class HeldResponse {
  readonly ran: Promise<Ran>;
  private readonly saved: Record<Held, Method>;
  private readonly chunks: Buffer[] = [];
  private stream: ReadableStreamDefaultController<Uint8Array> | undefined;
  private state: 'holding' | 'streaming' | 'done' = 'holding';

  constructor(
    private readonly res: Response,
    ctx: IdempotencyContext,
    run: () => void | Promise<void>,
  ) {
    // Reflect.get: the methods are kept as values, to be applied to `res` later.
    const saved = (name: Held): Method => {
      const method: unknown = Reflect.get(res, name);
      return method as Method;
    };
    this.saved = {
      writeHead: saved('writeHead'),
      write: saved('write'),
      end: saved('end'),
      flushHeaders: saved('flushHeaders'),
    };
    // Settles with the response once the handler ended it, or with what the handler threw.
    this.ran = new Promise<Ran>((settle) => {
      const resolve = (response: globalThis.Response): void =>
        settle({ kind: 'response', response });
      res.writeHead = ((status: number, ...rest: unknown[]) => {
        this.writeHead(status, rest);
        return res;
      }) as Response['writeHead'];
      res.write = ((...args: WriteArgs) => {
        this.push(args[0], args[1]);
        callbackOf(args)?.();
        return true;
      }) as Response['write'];
      res.end = ((...args: WriteArgs) => {
        this.push(args[0], args[1]);
        if (this.state === 'streaming') this.closeStream();
        else if (this.state === 'holding') {
          this.restore();
          resolve(this.toResponse(Buffer.concat(this.chunks)));
        }
        this.state = 'done';
        callbackOf(args)?.();
        return res;
      }) as Response['end'];
      res.flushHeaders = () => {
        if (this.state !== 'holding') return;
        this.state = 'streaming';
        const body = new ReadableStream<Uint8Array>({
          start: (controller) => {
            this.stream = controller;
            for (const chunk of this.chunks.splice(0)) controller.enqueue(chunk);
          },
        });
        resolve(ctx.streamed(this.toResponse(body)));
      };
      Promise.resolve()
        .then(run)
        .catch((error: unknown) => {
          this.discard();
          settle({ kind: 'threw', error });
        });
    });
  }

  get streaming(): boolean {
    return this.stream !== undefined;
  }

  /** Sends a streamed response: status and headers, then what the handler writes. */
  async send(response: globalThis.Response): Promise<void> {
    const res = this.res;
    res.statusCode = response.status;
    // The head goes out with the real writeHead (flushHeaders calls it); write and end stay
    // held until the handler ends, each chunk forwarded below in order.
    Reflect.set(res, 'writeHead', this.saved.writeHead);
    Reflect.apply(this.saved.flushHeaders, res, []);
    try {
      for await (const chunk of response.body ?? []) {
        if (Reflect.apply(this.saved.write, res, [chunk]) === false)
          await new Promise<void>((resolve) => res.once('drain', resolve));
      }
    } finally {
      this.restore();
      Reflect.apply(this.saved.end, res, []);
    }
  }

  /** The response will not be sent (rolled back, failed): drop whatever comes. */
  discard(): void {
    if (this.state === 'streaming') this.closeStream();
    this.state = 'done';
    this.restore();
  }

  private restore(): void {
    Object.assign(this.res, this.saved);
  }

  private closeStream(): void {
    try {
      this.stream?.close();
    } catch {
      // Already cancelled: the transaction did not commit and nobody reads it.
    }
  }

  private writeHead(status: number, rest: unknown[]): void {
    const res = this.res;
    res.statusCode = status;
    const headers = rest.find((r) => typeof r === 'object' && r !== null);
    if (Array.isArray(headers)) {
      for (let i = 0; i + 1 < headers.length; i += 2)
        res.setHeader(String(headers[i]), String(headers[i + 1]));
    } else if (headers !== undefined) {
      for (const [name, value] of Object.entries(headers as Record<string, string | string[]>))
        res.setHeader(name, value);
    }
  }

  private push(chunk: unknown, encoding: unknown): void {
    if (chunk === undefined || chunk === null || typeof chunk === 'function') return;
    if (this.state === 'done') return;
    const bytes =
      typeof chunk === 'string'
        ? Buffer.from(chunk, typeof encoding === 'string' ? (encoding as BufferEncoding) : 'utf8')
        : chunk instanceof Uint8Array
          ? Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength)
          : undefined;
    if (bytes === undefined) throw new TypeError('res.write() takes a string or bytes');
    if (this.stream === undefined) this.chunks.push(bytes);
    else {
      try {
        this.stream.enqueue(bytes);
      } catch {
        // Cancelled: see closeStream.
      }
    }
  }

  private toResponse(body: Uint8Array | ReadableStream<Uint8Array>): globalThis.Response {
    const headers = new Headers();
    for (const [name, value] of Object.entries(this.res.getHeaders())) {
      if (Array.isArray(value)) for (const v of value) headers.append(name, v);
      else if (value !== undefined) headers.set(name, String(value));
    }
    return new globalThis.Response(body, { status: this.res.statusCode, headers });
  }
}

function callbackOf(args: WriteArgs): Callback | undefined {
  return args.find((a): a is Callback => typeof a === 'function');
}
