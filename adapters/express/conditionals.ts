/**
 * An idempotent Express handler's answer is stored and replayed to every retry of its
 * key, whatever headers the retry carries, so it must not depend on the request's
 * Range or conditional headers, which the fingerprint does not cover. Express answers
 * from them on its own in two places: `res.sendFile` / `res.download` (the send module
 * gives a 206 of part of the file for `Range`, a bodyless 304 for a matching
 * `If-None-Match` or `If-Modified-Since`, a 412 or 416, on a POST too), and
 * `res.send`, which answers 304 when `req.fresh`. For the handler's run both answer as
 * to a request without those headers: the whole representation, a 200. (RFC 9110
 * has servers ignore `Range` and `If-Modified-Since` on anything but GET and HEAD.)
 * The handler's own code still sees every header on `req`.
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { Request, Response } from 'express';

/** What makes an answer a part of the representation, or "not modified" / "failed". */
const SHAPING = [
  'range',
  'if-range',
  'if-match',
  'if-none-match',
  'if-modified-since',
  'if-unmodified-since',
] as const;

/** Installs the guards on `req`/`res`; the returned function takes them off. */
export function ignoreConditionals(req: Request, res: Response): () => void {
  const sendFile = Reflect.get(res, 'sendFile') as (...args: unknown[]) => unknown;
  const sendFileWithout = (...args: unknown[]): unknown => {
    // sendFile reads `res.req` once, synchronously, and hands it to send: a view of
    // the request without the shaping headers, everything else the request's own.
    const real = res.req;
    res.req = Object.create(real, {
      headers: { value: withoutShaping(real.headers), enumerable: true, writable: true },
    }) as Request;
    try {
      return Reflect.apply(sendFile, res, args);
    } finally {
      res.req = real;
    }
  };
  Object.defineProperty(res, 'sendFile', {
    configurable: true,
    writable: true,
    value: sendFileWithout,
  });
  Object.defineProperty(req, 'fresh', { configurable: true, get: () => false });
  Object.defineProperty(req, 'stale', { configurable: true, get: () => true });
  return () => {
    Reflect.deleteProperty(res, 'sendFile');
    Reflect.deleteProperty(req, 'fresh');
    Reflect.deleteProperty(req, 'stale');
  };
}

function withoutShaping(headers: IncomingHttpHeaders): IncomingHttpHeaders {
  const copy: IncomingHttpHeaders = { ...headers };
  for (const name of SHAPING) Reflect.deleteProperty(copy, name);
  return copy;
}
