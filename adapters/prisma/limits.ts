import type { LayerTransactionSettings } from '../../src/data-layer.js';

/** The largest delay a Node timer keeps (a longer one fires at once: Prisma's timers are Node's). */
export const LONGEST_TIMER_MS = 2_147_483_647;

/**
 * Added to the door's own limit for Prisma's interactive `timeout`. Prisma's timer starts
 * after BEGIN, and when it fires Prisma sends ROLLBACK itself and the COMMIT it is asked
 * for next fails with its own P2028 (no answer of the server's: an unknown outcome to the
 * library). The door's limit is meant to end the transaction first, by the door's own
 * cancel and rollback; this margin covers the library's statements after the handler (the
 * stored answer, the xid check) that run once the door's limit has passed.
 */
export const PRISMA_TIMEOUT_MARGIN_MS = 5_000;

/** Prisma's interactive transaction options for a door's settings. */
export interface PrismaTransactionLimits {
  /** Prisma's `timeout`: the longest the transaction may stay open, in ms. */
  readonly timeout: number;
  /** Prisma's `maxWait`: the longest wait to start it (a connection, BEGIN), in ms. */
  readonly maxWait: number;
}

/**
 * Prisma's `timeout` and `maxWait` from the door's settings: never shorter than the door's
 * limits; the door's 0 (no limit) becomes the longest timer Node keeps (Prisma refuses 0,
 * and has no "no limit" of its own).
 */
export function prismaLimits(settings: LayerTransactionSettings): PrismaTransactionLimits {
  return {
    timeout: timerValue(settings.timeoutMs, PRISMA_TIMEOUT_MARGIN_MS),
    maxWait: timerValue(settings.acquireTimeoutMs, 0),
  };
}

function timerValue(doorMs: number, margin: number): number {
  if (!Number.isFinite(doorMs) || doorMs <= 0) return LONGEST_TIMER_MS;
  return Math.min(Math.ceil(doorMs) + margin, LONGEST_TIMER_MS);
}
