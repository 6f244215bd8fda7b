/**
 * Per ordering key, whose turn it is to hand a record to the runner. The runner keeps
 * the order in which records are handed over, so records of one key must be handed
 * over in offset order, each after the previous one: waiting for the consumer's
 * capacity (or a `partitionConcurrency` slot) each on its own, a record started later
 * could find room first and overtake an earlier one still waking from its wait.
 * Turns are granted in the order they were asked for, which is the records' start
 * order (offset order per key).
 */
export class HandoverTurns {
  /** Per key with a turn taken: the callers waiting for theirs, oldest first. */
  private readonly waiting = new Map<string, Array<() => void>>();

  /**
   * Asks for `key`'s turn. Undefined when it is free (the caller has it now), else a
   * promise that resolves when it is the caller's. Every caller then calls {@link pass}.
   */
  take(key: string): Promise<void> | undefined {
    const queue = this.waiting.get(key);
    if (queue === undefined) {
      this.waiting.set(key, []);
      return undefined;
    }
    return new Promise<void>((resolve) => queue.push(resolve));
  }

  /** The holder of `key`'s turn handed its record over (or gave up): the next one's turn. */
  pass(key: string): void {
    const queue = this.waiting.get(key);
    if (queue === undefined) return;
    const next = queue.shift();
    if (next === undefined) this.waiting.delete(key);
    else next();
  }
}
