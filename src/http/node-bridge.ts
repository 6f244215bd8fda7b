import type { IncomingHttpHeaders, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { RequestHead } from './idempotency-types.js';

/**
 * What the Node adapters (Express, Fastify) share: a web Request from a Node request,
 * and a web Response written to a Node response.
 */

/**
 * A web Request for a Node request whose body is still unread: the core reads it
 * (bounded by `maxRequestBytes`) straight from the socket.
 */
export function webRequest(
  url: string,
  method: string,
  headers: IncomingHttpHeaders,
  body: Readable | Uint8Array | undefined,
): Request {
  const init: RequestInit & { duplex?: 'half' } = { method, headers: headerList(headers) };
  if (method !== 'GET' && method !== 'HEAD' && body !== undefined) {
    if (body instanceof Uint8Array) init.body = body;
    else {
      init.body = Readable.toWeb(body) as ReadableStream<Uint8Array>;
      init.duplex = 'half';
    }
  }
  return new Request(url, init);
}

/**
 * The head of a Node request whose body an adapter has read: headers looked up in
 * Node's object, the (bodyless) web Request built only if asked for.
 */
export function nodeRequestHead(
  url: string,
  method: string,
  headers: IncomingHttpHeaders,
): RequestHead {
  let request: Request | undefined;
  return {
    method,
    url,
    header: (name) => {
      const value = headers[name.toLowerCase()];
      if (value === undefined) return null;
      return Array.isArray(value) ? value.join(', ') : value;
    },
    request: () => (request ??= webRequest(url, method, headers, undefined)),
  };
}

/** `scheme://host/path?query`, with a placeholder host when the request names none we can parse. */
export function requestUrl(protocol: string, host: string | undefined, path: string): string {
  try {
    return new URL(path, `${protocol}://${host ?? 'localhost'}`).href;
  } catch {
    return new URL(path, `${protocol}://localhost`).href;
  }
}

function headerList(headers: IncomingHttpHeaders): Array<[string, string]> {
  const list: Array<[string, string]> = [];
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined) continue;
    if (Array.isArray(value)) for (const v of value) list.push([name, v]);
    else list.push([name, value]);
  }
  return list;
}

/** The response's headers as Node takes them (Set-Cookie as a list). */
export function nodeHeaders(response: Response): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = {};
  response.headers.forEach((value, name) => {
    if (name !== 'set-cookie') out[name] = value;
  });
  const cookies = response.headers.getSetCookie();
  if (cookies.length > 0) out['set-cookie'] = cookies;
  return out;
}

/** Writes status, headers and body (streamed as it comes) to a Node response. */
export async function sendResponse(response: Response, res: ServerResponse): Promise<void> {
  res.statusCode = response.status;
  for (const [name, value] of Object.entries(nodeHeaders(response)))
    if (value !== undefined) res.setHeader(name, value);
  if (response.body === null) {
    res.end();
    return;
  }
  // A client gone mid-body is not an error of the request: its effect already committed.
  await pipeline(Readable.fromWeb(response.body), res).catch(() => undefined);
}

/** Headers a Node response had before a handler ran, to go back to. */
export interface HeaderSnapshot {
  statusCode: number;
  headers: OutgoingHttpHeaders;
}

export function snapshotHeaders(res: ServerResponse): HeaderSnapshot {
  const headers: OutgoingHttpHeaders = {};
  // Lists copied: the snapshot must not change with the response's own.
  for (const [name, value] of Object.entries(res.getHeaders()))
    headers[name] = Array.isArray(value) ? [...value] : value;
  return { statusCode: res.statusCode, headers };
}

export function restoreHeaders(res: ServerResponse, snapshot: HeaderSnapshot): void {
  for (const name of res.getHeaderNames()) res.removeHeader(name);
  for (const [name, value] of Object.entries(snapshot.headers))
    if (value !== undefined) res.setHeader(name, value);
  res.statusCode = snapshot.statusCode;
}
