/** Messages remembered at most (oldest forgotten first): a bound, not a working set. */
const MAX_REMEMBERED = 10_000;

/**
 * Receives that did not count as attempts: a FIFO group's messages received behind one
 * that went back (retry, release, redrive) are released without running, and SQS
 * counts that receive all the same. `attempt` is the receive count minus these, so an
 * innocent follower does not reach `maxAttempts` by waiting. Kept in this worker's
 * memory: a follower another worker held back, or one held back before a restart,
 * still carries those receives.
 */
export class HeldBackReceives {
  private readonly counts = new Map<string, number>();

  /** A received message goes back without running. */
  record(messageId: string | undefined): void {
    if (messageId === undefined) return;
    const count = (this.counts.get(messageId) ?? 0) + 1;
    // Re-inserted at the end: the map's order is the order of last use.
    this.counts.delete(messageId);
    this.counts.set(messageId, count);
    if (this.counts.size > MAX_REMEMBERED)
      this.counts.delete(this.counts.keys().next().value as string);
  }

  /** The attempt a receive stands for: its receive count minus the receives held back. */
  attempt(messageId: string | undefined, receiveCount: number): number {
    const held = messageId === undefined ? 0 : (this.counts.get(messageId) ?? 0);
    return Math.max(1, receiveCount - held);
  }
}
