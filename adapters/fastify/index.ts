/**
 * `effectively-once/http/fastify`: Idempotency-Key routes and webhook receivers for
 * Fastify 5, as a plugin over `effectively-once/http`. Routes (POST and PATCH by
 * default) run inside the key's transaction (`request.idempotency.tx`); what they
 * return is serialized, stored with the effect, committed, then sent. `fastify` 5 is an
 * optional peer dependency.
 * @packageDocumentation
 * @module effectively-once/http/fastify
 */
import { Readable } from 'node:stream';
import type { PoolClient } from 'pg';
import type {
  FastifyInstance,
  FastifyReply,
  FastifyRequest,
  RouteHandlerMethod,
  RouteOptions,
} from 'fastify';
import {
  checkWebhookOptions,
  ConfigurationError,
  executeBuffered,
  knownBytes,
  nodeHeaders,
  nodeRequestHead,
  requestUrl,
  webRequest,
  withoutEncoding,
  type BufferedExecutor,
  type Execution,
  type Idempotency,
  type IdempotencyContext,
  type RequestOverrides,
  type WebhookOptions,
} from '../../src/http/framework-kit.js';
import { dropStream, headOf, putHead, runRoute, type RouteRun } from './reply.js';

/**
 * What `request.idempotency.tx` is in your routes: a pg client, unless you name your
 * data layer's transaction type here (the endpoint families you register then take
 * that layer, `createIdempotency({ dataLayer })`):
 *
 * ```ts
 * declare module 'effectively-once/http/fastify' {
 *   interface FastifyIdempotencyTypes {
 *     tx: PrismaTx; // the type of your layer's transaction object
 *   }
 * }
 * ```
 */
// eslint-disable-next-line @typescript-eslint/no-empty-object-type -- declaration merging
export interface FastifyIdempotencyTypes {}

/** `ctx.tx`'s type in Fastify routes: {@link FastifyIdempotencyTypes}' `tx`, else a pg client. */
export type FastifyIdempotencyTx = FastifyIdempotencyTypes extends { tx: infer Tx }
  ? Tx
  : PoolClient;

/** A route's own setting, in its `config.idempotency`. */
export type RouteIdempotency =
  /** Not idempotent: the route runs as usual. */
  | false
  /**
   * Idempotent (whatever its method): optionally a webhook receiver, and optionally
   * with another endpoint family than the registration's (`use`: e.g. one created
   * with `concurrent: 'reject'`).
   */
  | { webhook?: WebhookOptions; use?: Idempotency<unknown> };

declare module 'fastify' {
  interface FastifyRequest {
    /**
     * In an idempotent route: the key's transaction (`tx`), the key, the signal… See
     * IdempotencyContext. Null elsewhere.
     */
    idempotency: IdempotencyContext<FastifyIdempotencyTx> | null;
  }
  interface FastifyContextConfig {
    /**
     * `false` opts a route out; an object opts it in (a webhook receiver, another
     * method, another endpoint family with `use`).
     */
    idempotency?: RouteIdempotency;
  }
}

/** Options of {@link idempotencyPlugin}. */
export interface FastifyIdempotencyOptions {
  /**
   * The endpoint settings and key table (see createIdempotency), with its data layer if
   * any: read the context with {@link idempotencyContext} (typed by it), or through
   * `request.idempotency` once {@link FastifyIdempotencyTypes} names its `tx`.
   */
  idempotency: Idempotency<unknown>;
  /**
   * Which routes the plugin wraps (runs inside a key's transaction): those with one of
   * these methods, unless `config.idempotency` says otherwise. Default POST, PATCH.
   * Not the same as createIdempotency's `methods`, the methods on which a wrapped
   * route requires the key (400 without it).
   */
  methods?: readonly string[];
  /** The key's scope from the Fastify request (`request.user.tenantId`), instead of the endpoint's. */
  scope?: (request: FastifyRequest) => string | Promise<string>;
  /** The route, instead of the endpoint's `route` (default: the URL's path). */
  route?: (request: FastifyRequest) => string;
}

const RAW_BODY = Symbol('effectively-once.rawBody');
/** A preParsing hook before ours decoded the body (it set `receivedEncodedLength`). */
const DECODED = Symbol('effectively-once.decodedBody');
type WithRawBody = FastifyRequest & { [RAW_BODY]?: Buffer; [DECODED]?: true };

/** The nearest registration's settings, on the Fastify instance it was registered in. */
const SETTINGS = Symbol('effectively-once.fastifySettings');
interface Settings {
  options: FastifyIdempotencyOptions;
  methods: ReadonlySet<string>;
}
type WithSettings = FastifyInstance & { [SETTINGS]?: Settings };
/** Handlers this plugin made: a route wrapped by an outer registration is not wrapped again. */
const wrapped = new WeakSet<RouteHandlerMethod>();

/**
 * The Fastify plugin. Register it (awaited) before the routes it should cover, in the
 * scope that holds them: like a fastify-plugin plugin it is not encapsulated itself, so
 * it covers the scope it is registered in and that scope's children. Registered again
 * inside a child scope (with other options), it takes over that scope's routes:
 *
 * ```ts
 * await app.register(idempotencyPlugin, { idempotency });
 * app.post('/charges', async (request, reply) => {
 *   const { tx } = request.idempotency!;
 *   const { rows } = await tx.query('INSERT INTO charges … RETURNING id', […]);
 *   return reply.code(201).send(rows[0]);
 * });
 * ```
 *
 * The handler may return its payload, `reply.send()` it (also later, from a callback),
 * or send a stream. Its work is done when its promise settles with an answer given (a
 * handler that returns no promise: at its `reply.send`); then the transaction commits
 * and the answer goes out. Throwing before that rolls back and goes to Fastify's error
 * handler; a 5xx rolls back and is sent unstored. In-place retries after a
 * serialization failure run the handler again.
 */
export const idempotencyPlugin = Object.assign(
  async (fastify: FastifyInstance, options: FastifyIdempotencyOptions): Promise<void> => {
    checkIdempotency(options?.idempotency, 'idempotency');
    const methods = new Set((options.methods ?? ['POST', 'PATCH']).map((m) => m.toUpperCase()));
    (fastify as WithSettings)[SETTINGS] = { options, methods };
    if (!fastify.hasRequestDecorator('idempotency')) fastify.decorateRequest('idempotency', null);
    fastify.addHook('onRoute', function (this: FastifyInstance, route: RouteOptions) {
      if (wrapped.has(route.handler)) return;
      // The registration nearest to the route's scope, whichever hook runs first.
      const settings = (this as WithSettings)[SETTINGS] ?? { options, methods };
      const setting = route.config?.idempotency;
      if (setting === false) return;
      const routeMethods = Array.isArray(route.method) ? route.method : [route.method];
      if (setting === undefined && !routeMethods.some((m) => settings.methods.has(m.toUpperCase())))
        return;
      const webhook = setting?.webhook;
      if (webhook !== undefined) checkWebhookOptions(webhook);
      if (setting?.use !== undefined) checkIdempotency(setting.use, 'config.idempotency.use');
      route.preParsing = [...hooksOf(route.preParsing), keepRawBody];
      route.handler = wrap(
        route.handler,
        setting?.use ?? settings.options.idempotency,
        settings.options,
        webhook,
      );
      wrapped.add(route.handler);
    });
  },
  {
    // fastify-plugin's markers, without the dependency: the hooks reach the registering scope.
    [Symbol.for('skip-override')]: true,
    [Symbol.for('fastify.display-name')]: 'effectively-once-idempotency',
  },
);

/** The endpoint family a request's context came from (see idempotencyContext). */
const FAMILY = Symbol('effectively-once.fastifyFamily');
type WithFamily = FastifyRequest & { [FAMILY]?: Idempotency<unknown> | undefined };

/**
 * The context of an idempotent route's request, typed by the endpoint family it runs
 * under (`createIdempotency({ dataLayer })` types `tx` as the layer's transaction
 * object): an alternative to `request.idempotency` that needs no
 * {@link FastifyIdempotencyTypes} declaration, for apps with more than one family.
 *
 * ```ts
 * app.post('/charges', async (request, reply) => {
 *   const { tx } = idempotencyContext(request, idempotency); // e.g. a Knex Transaction
 *   await tx('charges').insert({ … });
 *   return reply.code(201).send({ … });
 * });
 * ```
 *
 * @throws `ConfigurationError` outside an idempotent route's run, or when the
 * route runs under another family than `idempotency`.
 */
export function idempotencyContext<Tx>(
  request: FastifyRequest,
  idempotency: Idempotency<Tx>,
): IdempotencyContext<Tx> {
  const ctx = request.idempotency;
  const family = (request as WithFamily)[FAMILY] as unknown;
  if (ctx === null || family === undefined)
    throw new ConfigurationError(
      'idempotencyContext',
      'is only available while an idempotent route runs (the plugin wraps the route)',
    );
  if (family !== idempotency)
    throw new ConfigurationError(
      'idempotencyContext',
      'the route runs under another endpoint family (config.idempotency.use, or another registration)',
    );
  // The family that built `ctx` is `idempotency`: its tx is that family's Tx.
  return ctx as unknown as IdempotencyContext<Tx>;
}

function checkIdempotency(idempotency: Idempotency<unknown> | undefined, name: string): void {
  if (typeof idempotency?.execute !== 'function')
    throw new ConfigurationError(name, 'must come from createIdempotency()');
}

function hooksOf<T>(hooks: T | T[] | undefined): T[] {
  if (hooks === undefined) return [];
  return Array.isArray(hooks) ? hooks : [hooks];
}

/**
 * preParsing: keeps the raw bytes (the fingerprint's) and hands the parser a copy. It
 * runs after the app's own preParsing hooks, so a hook that decodes the body (a
 * `Content-Encoding`, as Fastify's docs show) hands it the decoded bytes: those are
 * fingerprinted, and the hook's `receivedEncodedLength` is passed on, for Fastify to
 * check the `Content-Length` against the encoded bytes as it would have.
 */
async function keepRawBody(
  request: FastifyRequest,
  _reply: FastifyReply,
  payload: NodeJS.ReadableStream,
): Promise<NodeJS.ReadableStream> {
  const limit = request.routeOptions.bodyLimit ?? 1024 * 1024;
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of payload as AsyncIterable<Buffer | string>) {
    const bytes = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
    size += bytes.length;
    // Past the limit: stop here; the parser sees the size and answers 413.
    if (size > limit) break;
    chunks.push(bytes);
  }
  const raw = Buffer.concat(chunks);
  (request as WithRawBody)[RAW_BODY] = raw;
  // Read now that the stream has ended: the count a decoding hook kept per chunk.
  const encoded = (payload as { receivedEncodedLength?: unknown }).receivedEncodedLength;
  if (typeof encoded === 'number') (request as WithRawBody)[DECODED] = true;
  return Object.assign(Readable.from(size > limit ? [raw, Buffer.alloc(1)] : [raw]), {
    receivedEncodedLength: typeof encoded === 'number' ? encoded : size,
  });
}

function wrap(
  handler: RouteHandlerMethod,
  idempotency: Idempotency<unknown>,
  options: FastifyIdempotencyOptions,
  webhook: WebhookOptions | undefined,
): RouteHandlerMethod {
  return async function idempotentRoute(this: FastifyInstance, request, reply) {
    const overrides: RequestOverrides = {};
    if (options.scope !== undefined) overrides.scope = await options.scope(request);
    if (options.route !== undefined) overrides.route = options.route(request);
    // Telemetry's name for the endpoint: the route's template, never the path (ids).
    else overrides.routeTemplate = request.routeOptions.url;
    if (webhook !== undefined) overrides.webhook = webhook;
    const raw = (request as WithRawBody)[RAW_BODY] ?? new Uint8Array(0);
    // A decoded body: the request it makes says so (no Content-Encoding, no encoded length).
    const headers =
      (request as WithRawBody)[DECODED] === true
        ? withoutEncoding(request.headers)
        : request.headers;
    const url = requestUrl(request.protocol, request.host, request.url);
    const snapshot = headOf(reply);
    // The latest run (a serialization failure runs the handler again).
    let latest: RouteRun | undefined;
    const routeHandler = async (ctx: IdempotencyContext<unknown>): Promise<Response> => {
      // An earlier run's answer is void: its transaction rolled back.
      dropStream(latest?.stream);
      putHead(reply, snapshot);
      // Typed by FastifyIdempotencyTypes, which the app declares to match its family.
      request.idempotency = ctx as IdempotencyContext<FastifyIdempotencyTx>;
      (request as WithFamily)[FAMILY] = idempotency;
      try {
        latest = await runRoute(handler, this, request, reply, ctx);
        return latest.response;
      } finally {
        request.idempotency = null;
        (request as WithFamily)[FAMILY] = undefined;
      }
    };
    // The body is in hand already: the core gets it as is, with a bodyless Request.
    const execution: Execution = isBufferedExecutor(idempotency)
      ? await idempotency[executeBuffered](
          nodeRequestHead(url, request.method, headers),
          raw,
          routeHandler,
          overrides,
        )
      : await idempotency.execute(
          webRequest(url, request.method, headers, raw),
          (_request, ctx) => routeHandler(ctx),
          overrides,
        );
    putHead(reply, snapshot);
    const stream =
      execution.kind === 'response' && execution.response === latest?.response
        ? latest.stream
        : undefined;
    if (stream === undefined) dropStream(latest?.stream);
    if (execution.kind === 'threw') throw execution.error;
    const { response } = execution;
    reply.code(response.status).headers(nodeHeaders(response));
    // The handler's stream payload, committed (or its 5xx rolled back): as it comes. One
    // that failed since: the response is cut, never ended cleanly (the client retries).
    if (stream?.failure !== undefined) {
      reply.hijack();
      reply.raw.destroy();
      return undefined;
    }
    if (stream !== undefined) return reply.send(stream.payload);
    // Bytes the library holds (serialized here, or replayed; carried beside a bodyless
    // Response, or the body built from them, left to the GC): sent as they are.
    const bytes = knownBytes(response);
    if (bytes !== undefined) return reply.send(payloadOf(bytes, response.headers));
    if (response.body === null) return reply.send();
    if (execution.streaming) return reply.send(Readable.fromWeb(response.body));
    return reply.send(payloadOf(new Uint8Array(await response.arrayBuffer()), response.headers));
  };
}

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/**
 * The payload to hand Fastify's `send` for bytes the library holds, in the type
 * Fastify itself gives the `onSend` hooks for such an answer: a string for JSON and
 * text (what its serializer makes, and what hooks written as its docs show,
 * `payload.replace(…)`, expect), else a Buffer. The first answer and every replay take
 * this one path, so the hooks see the same payload each time. Bytes that are not UTF-8
 * stay a Buffer, so nothing is re-encoded.
 */
function payloadOf(bytes: Uint8Array, headers: Headers): string | Buffer {
  const buffer = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const contentType = headers.get('content-type')?.toLowerCase() ?? '';
  const type = contentType.split(';')[0]?.trim() ?? '';
  // Fastify adds `; charset=utf-8` to a JSON type sent as a string: one without it came
  // as bytes (or a web Response), and stays so, its Content-Type untouched.
  const json = type.includes('json') && /;\s*charset=/.test(contentType);
  if (!json && !type.startsWith('text/')) return buffer;
  try {
    return utf8.decode(buffer);
  } catch {
    return buffer;
  }
}

function isBufferedExecutor(
  idempotency: Idempotency<unknown>,
): idempotency is Idempotency<unknown> & BufferedExecutor<unknown> {
  return typeof (idempotency as Partial<BufferedExecutor>)[executeBuffered] === 'function';
}
export { stepsFastify } from './steps.js';
