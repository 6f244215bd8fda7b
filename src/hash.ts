import { createHash } from 'node:crypto';

/** sha256 of a payload, as stored in `processed_messages.payload_hash`. */
export function payloadHash(payload: string | Uint8Array | undefined, fallback: unknown): Buffer {
  const hash = createHash('sha256');
  if (payload === undefined) hash.update(JSON.stringify(fallback) ?? '');
  else hash.update(payload);
  return hash.digest();
}
