/**
 * A Node request's body decoded per its `Content-Encoding`, as Express's own body
 * parsers decode it (body-parser: `deflate`, `gzip`, `br`, and `zstd` where Node has
 * it; `identity`; anything else is a 415), so that the handler and the fingerprint
 * see the body the client meant, whatever encoding carried it.
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { Readable, Transform } from 'node:stream';
import zlib from 'node:zlib';

/** A request's headers and body, the body decoded (and the headers saying so). */
export interface DecodedRequest {
  headers: IncomingHttpHeaders;
  body: Readable;
}

type Decoder = () => Transform;

const zstd = (zlib as { createZstdDecompress?: Decoder }).createZstdDecompress;
const DECODERS: Record<string, Decoder | undefined> = {
  deflate: () => zlib.createInflate(),
  gzip: () => zlib.createGunzip(),
  br: () => zlib.createBrotliDecompress(),
  zstd: zstd === undefined ? undefined : () => zstd(),
};

/**
 * The body of `body` decoded per `headers['content-encoding']`. An encoding the body
 * parsers do not decode is refused with their error (415), and a body that fails to
 * decode errors its stream with theirs (400): both carry `status` and `expose` as
 * http-errors' do, so Express's error handling answers them as it would have.
 */
export function decodeRequest(headers: IncomingHttpHeaders, body: Readable): DecodedRequest {
  const encoding = (headers['content-encoding'] ?? 'identity').toLowerCase();
  if (encoding === 'identity') return { headers, body };
  const decoder = DECODERS[encoding];
  if (decoder === undefined)
    throw httpError(415, `unsupported content encoding "${encoding}"`, {
      encoding,
      type: 'encoding.unsupported',
    });
  const decoded = decoder();
  // First in line: the error the body's reader sees is already the 400.
  decoded.on('error', (error: Error) => Object.assign(error, { status: 400, expose: true }));
  body.on('error', (error: Error) => decoded.destroy(error));
  body.pipe(decoded);
  return { headers: withoutEncoding(headers), body: decoded };
}

/**
 * The headers of a body that is decoded now: no `Content-Encoding`, and no
 * `Content-Length`, which counted the encoded bytes.
 */
export function withoutEncoding(headers: IncomingHttpHeaders): IncomingHttpHeaders {
  if (headers['content-encoding'] === undefined) return headers;
  const { 'content-encoding': _encoding, 'content-length': _length, ...rest } = headers;
  return rest;
}

function httpError(status: number, message: string, details: Record<string, unknown>): Error {
  return Object.assign(new Error(message), { status, statusCode: status, expose: true }, details);
}
