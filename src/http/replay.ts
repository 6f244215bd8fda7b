import { bytesResponse, carrierResponse } from './known-body.js';
import type { BodyOmitted, ResponseRecord, StoredRecord } from './store.js';

/** Set on every replayed response (Stripe's header). */
export const REPLAYED_HEADER = 'idempotent-replayed';
/** Set on a replay whose body was not kept: `too-large` or `stream`. */
export const BODY_OMITTED_HEADER = 'idempotent-body-omitted';

// Statuses whose responses may not have a body (the Response constructor refuses one).
const NULL_BODY = new Set([101, 103, 204, 205, 304]);
// Describe the stored bytes: meaningless on a replay that has none.
const BODY_HEADERS = ['content-type', 'content-encoding', 'content-length', 'content-range'];

/** What of a response is stored: its status, the allowlisted headers, the body (if kept). */
export function recordOf(
  response: Response,
  body: Uint8Array | null,
  omitted: BodyOmitted | null,
  allowed: ReadonlySet<string>,
): ResponseRecord {
  const headers: Record<string, string> = {};
  response.headers.forEach((value, name) => {
    if (allowed.has(name)) headers[name] = value;
  });
  return { status: response.status, headers, body, bodyOmitted: omitted };
}

/**
 * The stored response, byte for byte, with `Idempotent-Replayed: true`; as a carrier
 * (see carrierResponse) for an adapter that sends the bytes itself.
 */
export function replayOf(record: StoredRecord & { status: number }, carrier = false): Response {
  const headers = new Headers(record.headers ?? {});
  headers.set(REPLAYED_HEADER, 'true');
  if (record.bodyOmitted !== null) {
    for (const name of BODY_HEADERS) headers.delete(name);
    headers.set(BODY_OMITTED_HEADER, record.bodyOmitted);
  }
  // No body at all when none was kept: an empty one would get a default Content-Type.
  const body = NULL_BODY.has(record.status) || record.body === null ? null : record.body;
  const init = { status: record.status, headers };
  return carrier && body !== null ? carrierResponse(body, init) : bytesResponse(body, init);
}

/** The handler's response as first sent: every header it set, and the body. */
export function withBody(
  response: Response,
  body: Uint8Array | ReadableStream<Uint8Array> | null,
): Response {
  return new Response(NULL_BODY.has(response.status) ? null : body, {
    status: response.status,
    statusText: response.statusText,
    headers: response.headers,
  });
}
