/**
 * What the interceptor reads of a Nest HTTP platform's request and response, for
 * Express (`@nestjs/platform-express`) and Fastify (`@nestjs/platform-fastify`) alike,
 * typed structurally: neither platform is a dependency of this entry point.
 */
import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http';
import { ConfigurationError } from '../../src/errors.js';
import { requestUrl, withoutEncoding } from '../../src/http/framework-kit.js';

/** An Express or Fastify request as Nest hands it to an interceptor. */
export interface PlatformRequest {
  readonly method: string;
  readonly url: string;
  readonly headers: IncomingHttpHeaders;
  readonly protocol: string;
  /** The body's bytes as Nest's body parsers read them, with `rawBody: true`. */
  readonly rawBody?: unknown;
  readonly body?: unknown;
  /** Express. */
  readonly originalUrl?: string;
  readonly baseUrl?: string;
  readonly route?: { path?: unknown };
  get?(name: string): string | undefined;
  /** Fastify. */
  readonly host?: string;
  readonly routeOptions?: { url?: string };
  readonly raw?: unknown;
}

/** An Express response or a Fastify reply, for its status and headers. */
export interface PlatformResponse {
  statusCode: number;
  getHeaders(): OutgoingHttpHeaders | Record<string, unknown>;
  removeHeader(name: string): unknown;
  /** Express (Node's). */
  setHeader?(name: string, value: number | string | readonly string[]): unknown;
  /** Fastify. */
  header?(name: string, value: unknown): unknown;
  code?(status: number): unknown;
}

/** What the interceptor hands the web core for one request. */
export interface RequestParts {
  url: string;
  method: string;
  headers: IncomingHttpHeaders;
  body: Uint8Array;
  /** The matched route's template, for telemetry (`/orders/:id`). */
  routeTemplate: string | undefined;
  /** Fastify: its default text type differs from Express's. */
  fastify: boolean;
}

/** The request's parts; throws a ConfigurationError when its body cannot be had as bytes. */
export function requestParts(req: PlatformRequest): RequestParts {
  const fastify = req.raw !== undefined;
  const url = fastify
    ? requestUrl(req.protocol, req.host, req.url)
    : requestUrl(req.protocol, req.get?.('host'), req.originalUrl ?? req.url);
  const template = fastify
    ? req.routeOptions?.url
    : typeof req.route?.path === 'string'
      ? (req.baseUrl ?? '') + req.route.path
      : undefined;
  const raw = rawBytes(req);
  // Nest's body parsers hand the decoded bytes: the request they make has no encoding.
  const headers = raw.decoded ? withoutEncoding(req.headers) : req.headers;
  return { url, method: req.method, headers, body: raw.bytes, routeTemplate: template, fastify };
}

function rawBytes(req: PlatformRequest): { bytes: Uint8Array; decoded: boolean } {
  if (Buffer.isBuffer(req.rawBody)) return { bytes: req.rawBody, decoded: true };
  if (Buffer.isBuffer(req.body)) return { bytes: req.body, decoded: true };
  const length = req.headers['content-length'];
  const hasBody =
    req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
  if (!hasBody) return { bytes: new Uint8Array(0), decoded: false };
  throw new ConfigurationError(
    '@Idempotent()',
    "the request's body bytes are needed for its fingerprint: create the application with " +
      '`rawBody: true` (NestFactory.create(AppModule, { rawBody: true }))',
  );
}

/** The response's status and headers, to put back when the run's answer is not sent. */
export interface Head {
  status: number;
  headers: Record<string, unknown>;
}

export function snapshot(res: PlatformResponse): Head {
  return { status: res.statusCode, headers: { ...res.getHeaders() } };
}

export function restore(res: PlatformResponse, head: Head): void {
  for (const name of Object.keys(res.getHeaders())) res.removeHeader(name);
  for (const [name, value] of Object.entries(head.headers)) {
    if (value === undefined) continue;
    if (res.header !== undefined) res.header(name, value);
    else res.setHeader?.(name, value as string | readonly string[]);
  }
  if (res.code !== undefined) res.code(head.status);
  else res.statusCode = head.status;
}
