import type { AdmissionFloor, ConsumerSettings } from './config.js';
import {
  BodyParseError,
  DeliveryExpiredError,
  EffectivelyOnceError,
  InvalidKeyError,
  describe,
} from '../errors.js';
import { payloadHash } from './hash.js';
import { validateKey } from '../keys.js';
import type { Lifecycle } from './lifecycle.js';
import type { Settler } from './settle.js';
import type { Delivery, DeliveryOutcome } from '../types.js';
import { deadlinePassed } from './work-deadline.js';

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
 * unusable (dead-lettered: the producer's bug would fail every attempt the same way),
 * not when it is older than the admission floor (expired, then dead-lettered: its
 * claim may have been pruned, so the claim could not tell it from a new message).
 */
export function admit<T>(
  cfg: ConsumerSettings<T>,
  settler: Settler<T>,
  lifecycle: Lifecycle,
  delivery: Delivery<T>,
): Admission {
  settler.stats.received++;
  // Stopping, or past the source's deadline for it (a Lambda invocation's end): not
  // started, handed back untouched.
  if (lifecycle.stopping || deadlinePassed(delivery))
    return { outcome: settler.release(delivery, undefined) };
  if (delivery.rejection !== undefined) {
    return { outcome: settler.deadLetter(delivery, delivery.key, delivery.rejection) };
  }
  // The source derived the key (its `key` option); a failed derivation is a rejection.
  let key: string;
  try {
    key = validateKey(delivery.key, cfg.maxKeyLength);
  } catch (error) {
    const reason =
      error instanceof EffectivelyOnceError ? error : new InvalidKeyError(describe(error));
    return { outcome: settler.deadLetter(delivery, undefined, reason) };
  }
  // Off (no window, or `admissionFloor: false`): one field read, the timestamp never is.
  if (cfg.admissionFloor !== undefined) {
    const expired = expiry(cfg.admissionFloor, delivery, key);
    if (expired !== undefined) return { outcome: settler.expired(delivery, key, expired) };
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

/**
 * Why the floor refuses the delivery, if it does: first sent longer ago than the window
 * keeps a claim. Measured here, before the claim; the margin covers the time from here
 * to the claim and the clocks' skew. No timestamp (or a producer's, unless trusted, or
 * an invalid one): not floored.
 */
function expiry(
  floor: AdmissionFloor,
  delivery: Delivery<unknown>,
  key: string,
): DeliveryExpiredError | undefined {
  const sentAt = delivery.firstSentAt;
  if (sentAt === undefined) return undefined;
  if (delivery.firstSentBy === 'producer' && !floor.producerTimestamps) return undefined;
  const ageMs = Date.now() - sentAt.getTime();
  if (!(ageMs > floor.lifetimeMs)) return undefined;
  return new DeliveryExpiredError(key, sentAt, ageMs, floor.lifetimeMs);
}
