import { createHash } from 'node:crypto';

/**
 * The faults the demo injects, all of them things production SQS workers live with.
 * Timings are short so the demo finishes in seconds; the mechanics are the real ones.
 */
export const FAULTS = {
  /** Queue visibility timeout, seconds. Short so lapses and crash recovery are quick. */
  visibilityTimeoutSeconds: 2,
  /**
   * Share of charges whose handler is slow (a card network that hangs) and outlives
   * the visibility timeout. With the heartbeat off, SQS hands the message to another
   * worker while the first one still holds it: the second claim blocks on the unique
   * index until the first commits, then skips the charge as a duplicate.
   */
  slowShare: 0.02,
  /** How long a slow handler takes, ms (longer than the visibility timeout). */
  slowHandlerMs: 3_000,
  /** Usual handler latency range, ms. */
  handlerMs: [5, 25] as const,
  /**
   * Share of charges the producer sends again with the same Idempotency-Key (its
   * request timed out although SQS had the message), and the share sent a third time.
   */
  resendShare: 0.1,
  secondResendShare: 0.02,
  /** The crashing worker is killed right after this many of its own COMMITs. */
  crashAfterCommits: (messages: number): number =>
    Math.max(1, Math.min(40, Math.floor(messages / 12))),
} as const;

/** Whether a charge's handler will be slow: a fixed function of its key, so every worker agrees. */
export function isSlow(chargeId: string): boolean {
  const first = createHash('sha256').update(chargeId).digest().readUInt16BE(0);
  return first / 0x1_0000 < FAULTS.slowShare;
}

/** Small seeded PRNG (mulberry32): the same `--seed` gives the same charges and faults. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

/** Resolves after `ms`, or early when `signal` aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });
}
