import * as crypto from 'node:crypto';

type OneShotHash = (algorithm: string, data: string | Uint8Array, encoding: 'buffer') => Buffer;
// crypto.hash (Node >= 20.12) hashes in one call without a Hash object per message.
const oneShot = (crypto as { hash?: OneShotHash }).hash;

/** sha256 of a payload, as stored in `processed_messages.payload_hash`. */
export function payloadHash(payload: string | Uint8Array | undefined, fallback: unknown): Buffer {
  const data = payload ?? JSON.stringify(fallback) ?? '';
  if (oneShot !== undefined) return oneShot('sha256', data, 'buffer');
  return crypto.createHash('sha256').update(data).digest();
}
