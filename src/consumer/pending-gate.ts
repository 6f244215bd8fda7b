/**
 * Counts deliveries accepted and not yet settled, and lets a source wait for room
 * (backpressure) or the consumer wait for none (shutdown).
 */
export class PendingGate {
  private count = 0;
  private readonly capacityWaiters: Array<() => void> = [];
  private readonly idleWaiters: Array<() => void> = [];

  constructor(private readonly capacity: number) {}

  get pending(): number {
    return this.count;
  }

  /** Counts `work` as pending until it settles. */
  track<R>(work: Promise<R>): Promise<R> {
    this.enter();
    return work.finally(() => this.leave());
  }

  /** One more delivery pending; the caller calls {@link leave} when it settled. */
  protected enter(): void {
    this.count++;
  }

  /** `settled` deliveries (one, or a batch's) are no longer pending. */
  protected leave(settled = 1): void {
    this.count -= settled;
    this.wake();
  }

  freeCapacity(): number {
    return Math.max(0, this.capacity - this.count);
  }

  /** Resolves when there is room or `signal` aborts. */
  async waitForCapacity(signal: AbortSignal): Promise<void> {
    if (this.freeCapacity() > 0 || signal.aborted) return;
    await new Promise<void>((resolve) => {
      const done = () => {
        signal.removeEventListener('abort', done);
        resolve();
      };
      signal.addEventListener('abort', done, { once: true });
      this.capacityWaiters.push(done);
    });
  }

  /** Resolves when nothing is pending. */
  async idle(): Promise<void> {
    if (this.count === 0) return;
    await new Promise<void>((resolve) => this.idleWaiters.push(resolve));
  }

  private wake(): void {
    if (this.freeCapacity() > 0) for (const w of this.capacityWaiters.splice(0)) w();
    if (this.count === 0) for (const w of this.idleWaiters.splice(0)) w();
  }
}
