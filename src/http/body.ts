import { untilAborted } from '../deadline.js';
import { RequestBodyConsumedError, RequestTooLargeError } from './errors.js';

/**
 * The request body's bytes, read once (the fingerprint needs them and every attempt's
 * handler gets a fresh copy), refusing more than `limit` bytes without reading them. A
 * body read already (middleware before the endpoint consumed it) is refused: read on,
 * the Request would throw, and its bytes are gone.
 *
 * `stop` (the shutdown's hard stop) ends a read still waiting on the client (a stalled
 * upload): it rejects with `stop.reason` and reads no further. The stream is left as
 * it is, not cancelled: on Node, cancelling destroys the request's socket, and the
 * client would get a reset instead of the 503 that tells it nothing was applied.
 */
export async function readRequestBody(
  request: Request,
  limit: number,
  stop?: AbortSignal,
): Promise<Uint8Array> {
  if (request.bodyUsed) throw new RequestBodyConsumedError();
  const declared = Number(request.headers.get('content-length') ?? NaN);
  if (Number.isFinite(declared) && declared > limit) throw new RequestTooLargeError(limit);
  if (request.body === null) return new Uint8Array(0);
  const { chunks, size, rest } = await readUpTo(request.body, limit, stop);
  if (rest !== undefined) {
    await rest.cancel().catch(() => undefined);
    throw new RequestTooLargeError(limit);
  }
  return concat(chunks, size);
}

/**
 * The same refusal for a body an adapter has already read: more than `limit` bytes,
 * declared (`contentLength`, the header) or actual.
 */
export function checkRequestBody(
  contentLength: string | null,
  body: Uint8Array,
  limit: number,
): Uint8Array {
  const declared = Number(contentLength ?? NaN);
  if ((Number.isFinite(declared) && declared > limit) || body.byteLength > limit)
    throw new RequestTooLargeError(limit);
  return body;
}

/** A response body read as far as `limit` bytes. */
export type ReadBody =
  | { kind: 'complete'; bytes: Uint8Array }
  /** Longer than `limit`: `stream` replays the bytes read so far, then the rest. */
  | { kind: 'too-large'; stream: ReadableStream<Uint8Array> };

/**
 * Reads a response body up to `limit` bytes. A body that ends within it is returned
 * whole (to be stored); a longer one comes back as a stream that yields everything,
 * the part already read first, so the first answer still gets all of it.
 */
export async function readResponseBody(
  body: ReadableStream<Uint8Array> | null,
  limit: number,
): Promise<ReadBody> {
  if (body === null) return { kind: 'complete', bytes: new Uint8Array(0) };
  const { chunks, size, rest } = await readUpTo(body, limit);
  if (rest === undefined) return { kind: 'complete', bytes: concat(chunks, size) };
  return { kind: 'too-large', stream: prepend(chunks, rest) };
}

interface Prefix {
  chunks: Uint8Array[];
  size: number;
  /** The reader, when the body went on past the limit (its next chunk is not read yet). */
  rest: ReadableStreamDefaultReader<Uint8Array> | undefined;
}

async function readUpTo(
  stream: ReadableStream<Uint8Array>,
  limit: number,
  stop?: AbortSignal,
): Promise<Prefix> {
  const reader = stream.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const read = reader.read();
    const { done, value } = stop === undefined ? await read : await untilAborted(read, stop);
    if (done) return { chunks, size, rest: undefined };
    chunks.push(value);
    size += value.byteLength;
    if (size > limit) return { chunks, size, rest: reader };
  }
}

function prepend(
  chunks: Uint8Array[],
  reader: ReadableStreamDefaultReader<Uint8Array>,
): ReadableStream<Uint8Array> {
  const queued = [...chunks];
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      const next = queued.shift();
      if (next !== undefined) return controller.enqueue(next);
      const { done, value } = await reader.read();
      if (done) controller.close();
      else controller.enqueue(value);
    },
    cancel(reason) {
      return reader.cancel(reason);
    },
  });
}

function concat(chunks: Uint8Array[], size: number): Uint8Array {
  if (chunks.length === 1 && chunks[0] !== undefined) return chunks[0];
  const out = new Uint8Array(size);
  let offset = 0;
  for (const chunk of chunks) {
    out.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return out;
}
