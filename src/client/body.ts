import { ConfigurationError, describe } from '../errors.js';
import { UnreplayableBodyError } from './errors.js';

/** A request body frozen once per logical operation. */
export interface FrozenBody {
  /** The exact bytes every attempt sends; undefined for no body. */
  bytes: Uint8Array | undefined;
  /** The Content-Type fetch would have derived from the original body, if any. */
  contentType: string | null;
}

/**
 * Serialises `body` (or `json`) once, before the first attempt, into the bytes every
 * attempt sends. Serialising through `new Response(body)` gives exactly what fetch
 * itself would send, including the default Content-Type, and pins what fetch would
 * otherwise redo per attempt: a FormData's multipart boundary is random per
 * serialisation, so a FormData sent twice is two different byte strings. The bytes are
 * a copy, so a caller mutating its buffer after the call changes nothing.
 */
export async function freezeBody(
  body: RequestInit['body'] | undefined,
  json: unknown,
  hasJson: boolean,
): Promise<FrozenBody> {
  if (hasJson) {
    if (body !== undefined && body !== null)
      throw new ConfigurationError('json', 'cannot be combined with init.body: pass one body');
    return { bytes: new TextEncoder().encode(stringify(json)), contentType: 'application/json' };
  }
  if (body === undefined || body === null) return { bytes: undefined, contentType: null };
  const unreplayable = streamKind(body);
  if (unreplayable !== undefined) throw new UnreplayableBodyError(unreplayable);
  const response = new Response(body);
  return {
    bytes: new Uint8Array(await response.arrayBuffer()),
    contentType: response.headers.get('content-type'),
  };
}

function stringify(value: unknown): string {
  let text: string | undefined;
  try {
    text = JSON.stringify(value);
  } catch (error) {
    throw new ConfigurationError('json', 'is not JSON-serialisable', { error: describe(error) });
  }
  if (text === undefined)
    throw new ConfigurationError('json', 'is not JSON-serialisable (JSON.stringify gave nothing)');
  return text;
}

/** Which kind of one-shot body this is, if it is one. */
function streamKind(body: NonNullable<RequestInit['body']>): string | undefined {
  if (typeof body !== 'object') return undefined;
  if (typeof ReadableStream !== 'undefined' && body instanceof ReadableStream)
    return 'ReadableStream';
  // A stream from another realm, or a Node Readable (also async-iterable).
  if ('getReader' in body && typeof body.getReader === 'function') return 'ReadableStream';
  if (Symbol.asyncIterator in body) return 'async iterable';
  return undefined;
}
