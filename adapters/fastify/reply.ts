/**
 * A Fastify route handler's run inside the key's transaction: the handler gets a
 * held reply, and what it sends or returns becomes a web Response to store.
 *
 * The held reply is a child of the real one (`Object.create(reply)`): every method and
 * decorator works as usual (`code`, `header`, `type`, `serialize`, `redirect` …), but
 * `send` reports the answer to the run instead of sending it, and `then` (what `await
 * reply` and `return reply` use) resolves at that answer. Its head (status and headers)
 * is its own: Fastify's own methods run over a private header object and a `raw` whose
 * status and header methods are private too, so the real reply is never touched: there
 * is nothing to put back, and a handler abandoned on timeout that calls `reply.code()`
 * or `reply.send` later reaches only the held one, whose head nobody reads any more
 * (the adapter answers with the run's Response, never with the held reply).
 *
 * The status and headers are taken at the `send` that answered, as Fastify writes them
 * then: a `reply.code(400)` or `reply.header()` after it (a `catch` that runs after the
 * answer, a second `send`, which Fastify ignores) changes nothing, in plain Fastify as
 * here; and `reply.sent` is true from that answer on.
 */
import type { Readable } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest, RouteHandlerMethod } from 'fastify';
import {
  carrierResponse,
  ConfigurationError,
  declaredResponse,
  HandlerRun,
  hooksOf,
  type DeclaredBody,
  type IdempotencyContext,
  type KeptBody,
} from '../../src/http/framework-kit.js';

/** A stream payload (Node or web, as Fastify takes them), sent as it comes after COMMIT. */
export type StreamPayload = NodeJS.ReadableStream | ReadableStream<Uint8Array>;

/** One run of the route's handler: its Response, and its stream payload if any. */
export interface RouteRun {
  response: Response;
  stream: HeldStream | undefined;
}

/**
 * A stream payload, held until COMMIT without being read: never stored (a replay says
 * `stream`). An error it raises while held is kept (an `'error'` without a listener
 * would end the process): before COMMIT it rolls back; after, the adapter cuts the
 * response instead of sending it.
 */
export class HeldStream implements DeclaredBody {
  failure: Error | undefined;

  constructor(readonly payload: StreamPayload) {
    if ('on' in payload) payload.on('error', (error: Error) => (this.failure ??= error));
  }

  seal(): Promise<KeptBody> {
    if (this.failure !== undefined) return Promise.reject(this.failure);
    return Promise.resolve({ bytes: null, omitted: 'stream' });
  }
}

/**
 * Runs the route's handler with a held reply; resolves with the Response to store once
 * its work is done (see completion.ts), or rejects with what it threw.
 */
export async function runRoute(
  handler: RouteHandlerMethod,
  instance: FastifyInstance,
  request: FastifyRequest,
  reply: FastifyReply,
  ctx: IdempotencyContext<unknown>,
): Promise<RouteRun> {
  // Fastify's rules for what a handler returns: a sync handler's value is sent unless
  // it is undefined; an async handler's is sent (undefined too) unless it sent already.
  // A stream is held from the moment it is answered with (its errors kept).
  const run = new HandlerRun<unknown>({
    returned: (value, async) =>
      async || value !== undefined
        ? { answer: isStream(value) ? new HeldStream(value) : value }
        : 'wait',
    workDone: hooksOf(ctx).workDone,
  });
  const { held, head } = holdReply(reply, run);
  const outcome = await run.start(() => handler.call(instance, request, held)).done;
  if (outcome.kind === 'threw') {
    // A stream it answered with before failing will not be read.
    const given = run.given?.answer;
    if (given instanceof HeldStream) dropStream(given);
    throw outcome.error;
  }
  // The head as it was at the send that answered (a returned value: as it is now), on
  // the held reply only: the Response made of it is what the adapter sends.
  const answeredHead = head();
  if (answeredHead !== undefined) putHead(held, answeredHead);
  return responseOf(held, request, outcome.answer === held ? undefined : outcome.answer);
}

/** A reply's status and headers, to go back to. */
export interface ReplyHead {
  status: number;
  headers: Record<string, unknown>;
}

export function headOf(reply: FastifyReply): ReplyHead {
  const headers: Record<string, unknown> = {};
  // Lists copied: the head must not change with the reply's own.
  for (const [name, value] of Object.entries(reply.getHeaders()))
    headers[name] = Array.isArray(value) ? [...(value as unknown[])] : value;
  return { status: reply.statusCode, headers };
}

export function putHead(reply: FastifyReply, head: ReplyHead): void {
  for (const name of Object.keys(reply.getHeaders())) reply.removeHeader(name);
  for (const [name, value] of Object.entries(head.headers))
    if (value !== undefined) reply.header(name, value);
  reply.code(head.status);
}

function holdReply(
  reply: FastifyReply,
  run: HandlerRun<unknown>,
): { held: FastifyReply; head: () => ReplyHead | undefined } {
  const held = Object.create(reply) as FastifyReply;
  ownHead(held, reply);
  let head: ReplyHead | undefined;
  const send = (payload?: unknown): FastifyReply => {
    // Fastify sends an Error to the error handler: here it rolls back first.
    if (payload instanceof Error) {
      run.fail(payload);
      return held;
    }
    const current = headOf(held);
    if (run.answer(isStream(payload) ? new HeldStream(payload) : payload)) head = current;
    else {
      reply.log.warn(
        'effectively-once: reply.send() after the idempotent route answered or timed out; ignored',
      );
      if (isStream(payload)) dropStream(payload);
    }
    return held;
  };
  const then = (fulfilled?: () => unknown, rejected?: (error: unknown) => unknown): void =>
    void run.answered.then(fulfilled, rejected);
  const hijack = (): never => {
    throw new ConfigurationError(
      'reply.hijack()',
      'an idempotent route answers after COMMIT; it cannot hand the response to the handler',
    );
  };
  Object.defineProperties(held, {
    send: { value: send },
    then: { value: then },
    hijack: { value: hijack },
    // Plain Fastify's `sent` is true once the answer is written: here, once given.
    sent: { get: () => run.given !== undefined || reply.sent },
  });
  return { held, head: () => head };
}

/** Fastify's symbol for a reply's own headers (those not on `raw`), found on the reply. */
function replyHeadersKey(reply: object): symbol {
  const key = Object.getOwnPropertySymbols(reply).find(
    (s) => s.description === 'fastify.reply.headers',
  );
  if (key === undefined)
    throw new ConfigurationError(
      'idempotencyPlugin',
      'this Fastify version keeps reply headers where the plugin cannot hold them (Fastify 5 expected)',
    );
  return key;
}

/** The `raw` members that make the head: on the held reply, they act on its own head. */
const RAW_HEAD = new Set<PropertyKey>([
  'statusCode',
  'setHeader',
  'appendHeader',
  'getHeader',
  'getHeaders',
  'getHeaderNames',
  'hasHeader',
  'removeHeader',
]);

/**
 * Gives `held` a head of its own, starting as the real reply's: Fastify's methods keep
 * headers in the reply's header object (made its own here), the status and the rest in
 * `raw` (a view of the real `raw` whose head members act on the same private state).
 * Fastify's own code then runs unchanged (`code`, `header`, `type`, `getHeaders`,
 * `serialize` by status, `redirect` …) and never writes to the real reply.
 */
function ownHead(held: FastifyReply, reply: FastifyReply): void {
  const headers: Record<string, unknown> = headOf(reply).headers;
  let status = reply.statusCode;
  const realRaw = reply.raw;
  const lower = (name: unknown): string => String(name).toLowerCase();
  const head: Record<string, unknown> = {
    setHeader(name: string, value: unknown) {
      headers[lower(name)] = value;
      return raw;
    },
    appendHeader(name: string, value: unknown) {
      const key = lower(name);
      const before = headers[key];
      const list = before === undefined ? [] : Array.isArray(before) ? before : [before];
      headers[key] = [
        ...(list as unknown[]),
        ...(Array.isArray(value) ? (value as unknown[]) : [value]),
      ];
      return raw;
    },
    getHeader: (name: string) => headers[lower(name)],
    getHeaders: () => ({ ...headers }),
    getHeaderNames: () => Object.keys(headers),
    hasHeader: (name: string) => headers[lower(name)] !== undefined,
    removeHeader(name: string) {
      Reflect.deleteProperty(headers, lower(name));
    },
  };
  // Everything else is the real `raw`'s, called on it (its events, socket, …).
  const bound = new Map<PropertyKey, unknown>();
  const raw = new Proxy(realRaw, {
    get(target, property) {
      if (property === 'statusCode') return status;
      if (RAW_HEAD.has(property)) return head[property as string];
      const value: unknown = Reflect.get(target, property, target);
      if (typeof value !== 'function') return value;
      if (!bound.has(property)) bound.set(property, (value as () => unknown).bind(target));
      return bound.get(property);
    },
    set(target, property, value: unknown) {
      if (property === 'statusCode') status = Number(value);
      else if (!RAW_HEAD.has(property)) return Reflect.set(target, property, value, target);
      return true;
    },
  });
  Object.defineProperties(held, {
    raw: { value: raw, enumerable: true },
    [replyHeadersKey(reply)]: { value: headers, writable: true },
  });
}

/** Fastify's own test: a Node stream has `pipe`, a web stream `getReader`. */
function isStream(payload: unknown): payload is StreamPayload {
  if (typeof payload !== 'object' || payload === null) return false;
  const candidate = payload as { pipe?: unknown; getReader?: unknown };
  return typeof candidate.pipe === 'function' || typeof candidate.getReader === 'function';
}

/** The payload as a web Response, serialized as Fastify would (hooks, the route's serializer). */
async function responseOf(
  held: FastifyReply,
  request: FastifyRequest,
  payload: unknown,
): Promise<RouteRun> {
  // Fastify runs the preSerialization hooks on an object payload before serializing it
  // (they may reshape it, an envelope or fields removed, and set headers): the stored
  // answer is what they made of it.
  const serialized = isObjectPayload(payload)
    ? held.serialize(await preSerialized(held, request, payload))
    : undefined;
  const headers = new Headers();
  for (const [name, value] of Object.entries(held.getHeaders())) {
    if (Array.isArray(value)) for (const v of value) headers.append(name, v);
    else if (value !== undefined) headers.set(name, String(value));
  }
  const type = (fallback: string): void => {
    if (!headers.has('content-type')) headers.set('content-type', fallback);
  };
  const init = { status: held.statusCode, headers };
  const bytes = (body: Uint8Array): RouteRun => ({
    response: carrierResponse(body, init),
    stream: undefined,
  });
  if (payload === undefined || payload === null)
    return { response: new Response(null, init), stream: undefined };
  if (isWebResponse(payload))
    return { response: fromWebResponse(payload, init), stream: undefined };
  if (typeof payload === 'string') {
    type('text/plain; charset=utf-8');
    jsonCharset(headers);
    return bytes(Buffer.from(payload));
  }
  if (payload instanceof Uint8Array) {
    type('application/octet-stream');
    return bytes(payload);
  }
  if (payload instanceof HeldStream) {
    type('application/octet-stream');
    return { response: declaredResponse(payload, init), stream: payload };
  }
  type('application/json; charset=utf-8');
  jsonCharset(headers);
  return bytes(
    typeof serialized === 'string'
      ? Buffer.from(serialized)
      : serialized instanceof Uint8Array
        ? serialized
        : new Uint8Array(serialized as ArrayBuffer),
  );
}

/**
 * Fastify's rule for text it sends with a JSON type: `; charset=utf-8` is added when
 * the type names no charset (so the answer, and its `onSend` payload, stay a string).
 */
function jsonCharset(headers: Headers): void {
  const type = headers.get('content-type');
  if (type === null) return;
  if (!(type.split(';')[0] ?? '').toLowerCase().includes('json')) return;
  if (!/;\s*charset=/i.test(type)) headers.set('content-type', `${type}; charset=utf-8`);
}

/** A payload Fastify serializes: not empty, text, bytes, a stream or a web Response. */
function isObjectPayload(payload: unknown): boolean {
  return (
    payload !== undefined &&
    payload !== null &&
    typeof payload !== 'string' &&
    !(payload instanceof Uint8Array) &&
    !(payload instanceof HeldStream) &&
    !isWebResponse(payload)
  );
}

/** Fastify's own test for a web `Response` payload (another realm's class included). */
function isWebResponse(payload: unknown): payload is Response {
  return (
    typeof payload === 'object' && Object.prototype.toString.call(payload) === '[object Response]'
  );
}

/**
 * A web Response the handler answered with, as Fastify sends one: its status, the
 * reply's headers with the Response's over them, and its body, which the engine then
 * reads like a fetch-style handler's (kept up to `maxBodyBytes`, the rest streamed).
 */
function fromWebResponse(payload: Response, init: { status: number; headers: Headers }): Response {
  if (payload.bodyUsed) throw new TypeError('the Response payload was already read');
  const headers = init.headers;
  payload.headers.forEach((value, name) => {
    if (name !== 'set-cookie') headers.set(name, value);
  });
  for (const cookie of payload.headers.getSetCookie()) headers.append('set-cookie', cookie);
  // A 204 or 304 Response has no body: its constructor refuses one.
  return new Response(payload.body, { status: payload.status, headers });
}

type PreSerializationHook = (
  this: unknown,
  request: FastifyRequest,
  reply: FastifyReply,
  payload: unknown,
  done: (error?: Error | null, payload?: unknown) => void,
) => unknown;

/**
 * The route's preSerialization hooks (the app's and the route's, as Fastify assembled
 * them) run over `payload` the way Fastify's own runner does: in order, each either
 * calling `done(err, payload)` or returning a promise; a new payload replaces the old
 * unless undefined. Fastify exposes the assembled list only on the reply's route
 * context (its `fastify.context` symbol), so that is where it is read.
 */
async function preSerialized(
  reply: FastifyReply,
  request: FastifyRequest,
  payload: unknown,
): Promise<unknown> {
  const context: unknown = Reflect.get(reply, routeContextKey(reply) ?? Symbol());
  const hooks = (context as { preSerialization?: PreSerializationHook[] | null } | undefined)
    ?.preSerialization;
  let current = payload;
  for (const hook of hooks ?? []) {
    const next = await new Promise<unknown>((resolve, reject) => {
      const done = (error?: Error | null, value?: unknown): void =>
        error ? reject(error) : resolve(value);
      const result = hook.call(reply.server, request, reply, current, done);
      if (isThenable(result)) Promise.resolve(result).then(resolve, reject);
    });
    if (next !== undefined) current = next;
  }
  return current;
}

/** Fastify's route-context symbol, found on the reply (or the real one it was made from). */
function routeContextKey(reply: object): symbol | undefined {
  for (let o: object | null = reply; o !== null; o = Object.getPrototypeOf(o) as object | null) {
    const key = Object.getOwnPropertySymbols(o).find((s) => s.description === 'fastify.context');
    if (key !== undefined) return key;
  }
  return undefined;
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as { then?: unknown }).then === 'function'
  );
}

/** A stream payload that will not be sent (rolled back, replaced): let its source go. */
export function dropStream(stream: StreamPayload | HeldStream | undefined): void {
  if (stream instanceof HeldStream) stream = stream.payload;
  if (stream === undefined) return;
  if ('getReader' in stream) void stream.cancel().catch(() => undefined);
  else (stream as Partial<Readable>).destroy?.();
}
