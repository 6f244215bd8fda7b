/**
 * Responses the library builds itself from bytes it already holds (an adapter's
 * serialized reply, a replayed record), with those bytes on the side: the engine and
 * the adapters take the bytes instead of reading them back out of the Response's
 * stream, and keep the Response itself instead of building another one around them.
 */
const known = new WeakMap<Response, Uint8Array>();

/** `new Response(bytes, init)`, remembering `bytes`. */
export function bytesResponse(bytes: Uint8Array | null, init: ResponseInit): Response {
  const response = new Response(bytes, init);
  if (bytes !== null) known.set(response, bytes);
  return response;
}

/**
 * For an adapter that sends bytes itself: a Response with status and headers but no
 * body, carrying `bytes` on the side (read them with knownBytes). Building a body
 * stream costs ten times the rest of a Response, for a stream nobody would read.
 * Never hand one to user code: its `body` is null.
 */
export function carrierResponse(bytes: Uint8Array, init: ResponseInit): Response {
  const response = new Response(null, init);
  known.set(response, bytes);
  return response;
}

/**
 * The bytes `response` was built with, while its body is unread (so it still holds
 * exactly them), or the bytes a carrier carries; undefined for any other Response.
 */
export function knownBytes(response: Response): Uint8Array | undefined {
  if (response.bodyUsed) return undefined;
  return known.get(response);
}
