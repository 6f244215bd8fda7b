/**
 * The stored answer of an `@Idempotent()` route: what Nest would send for the value the
 * route handler returned, as a web Response, built before COMMIT so it is stored with
 * the effect. A handler may return a web `Response` itself (Nest 12 sends one as the
 * whole answer); anything else is serialized as Nest's platforms do: no body for
 * `undefined`/`null`, bytes as they are, a string as text, the rest as JSON, with the
 * route's status (`@HttpCode()`, or as the handler set it) and headers (`@Header()`).
 */
import type { Readable } from 'node:stream';
import { ConfigurationError } from '../../src/errors.js';
import type { Head } from './platform.js';

export function answerOf(value: unknown, head: Head, fastify: boolean): Response {
  if (value instanceof Response) return value;
  const headers = new Headers();
  for (const [name, v] of Object.entries(head.headers)) {
    if (v === undefined) continue;
    for (const one of Array.isArray(v) ? v : [v]) headers.append(name, String(one));
  }
  const { body, type } = bodyOf(value, fastify);
  if (type !== undefined && !headers.has('content-type')) headers.set('content-type', type);
  return new Response(body, { status: head.status, headers });
}

function bodyOf(
  value: unknown,
  fastify: boolean,
): { body: ConstructorParameters<typeof Response>[0]; type?: string } {
  if (value === undefined || value === null) return { body: null };
  if (value instanceof Uint8Array)
    return { body: new Uint8Array(value), type: 'application/octet-stream' };
  if (typeof value === 'string')
    // What each platform gives a string: Express's res.send, Fastify's reply.send.
    return { body: value, type: `${fastify ? 'text/plain' : 'text/html'}; charset=utf-8` };
  if (isStream(value))
    throw new ConfigurationError(
      '@Idempotent()',
      'return a web Response for a streamed answer (ctx.streamed(response) to send it unstored)',
    );
  return { body: JSON.stringify(value), type: 'application/json; charset=utf-8' };
}

function isStream(value: unknown): boolean {
  if (typeof value !== 'object' || value === null) return false;
  return (
    typeof (value as Partial<Readable>).pipe === 'function' ||
    typeof (value as { getStream?: unknown }).getStream === 'function' ||
    value instanceof ReadableStream
  );
}
