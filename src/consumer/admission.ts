import type { ConsumerConfig } from './config.js';
import { BodyParseError, EffectivelyOnceError, InvalidKeyError, describe } from '../errors.js';
import { payloadHash } from './hash.js';
import { keyFromFunction, validateKey } from '../keys.js';
import type { Lifecycle } from './lifecycle.js';
import type { Settler } from './settle.js';
import type { Delivery, DeliveryOutcome } from '../types.js';

/**
 * Either what the claim needs (the validated key and the payload hash), or the outcome
 * (still settling) of a delivery that never reaches the database. Synchronous on the
 * common path: no promise per delivery.
 */
export type Admission =
  { key: string; hash: Buffer | null } | { outcome: Promise<DeliveryOutcome> };

/**
 * Counts the delivery and decides whether it may be processed at all: not while
 * stopping (released), not when the adapter rejected it or its key or payload is
 * unusable (dead-lettered: the producer's bug would fail every attempt the same way).
 */
export function admit<T>(
  cfg: ConsumerConfig<T>,
  settler: Settler<T>,
  lifecycle: Lifecycle,
  delivery: Delivery<T>,
): Admission {
  settler.stats.received++;
  if (lifecycle.stopping) return { outcome: settler.release(delivery, undefined) };
  if (delivery.rejection !== undefined) {
    return { outcome: settler.deadLetter(delivery, delivery.key, delivery.rejection) };
  }
  const derived = cfg.key ? keyFromFunction(cfg.key, delivery, {}) : { key: delivery.key };
  if (derived.rejection !== undefined)
    return { outcome: settler.deadLetter(delivery, undefined, derived.rejection) };
  let key: string;
  try {
    key = validateKey(derived.key, cfg.maxKeyLength);
  } catch (error) {
    const reason =
      error instanceof EffectivelyOnceError ? error : new InvalidKeyError(describe(error));
    return { outcome: settler.deadLetter(delivery, undefined, reason) };
  }
  if (!cfg.payloadHash) return { key, hash: null };
  try {
    return { key, hash: payloadHash(delivery.payload, delivery.body) };
  } catch (error) {
    // e.g. a BigInt in a body without raw bytes: JSON.stringify throws on every attempt.
    const reason = new BodyParseError(
      `it cannot be serialised for the payload hash: ${describe(error)}`,
      {
        cause: error,
        details: { key },
      },
    );
    return { outcome: settler.deadLetter(delivery, key, reason) };
  }
}
