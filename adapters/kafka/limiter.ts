/**
 * A counting semaphore with FIFO waiters and abortable waits: `partitionConcurrency`
 * slots shared by the partition workers. `Infinity` never waits.
 */
export class Limiter {
  private used = 0;
  private readonly waiters: Array<{ grant: () => void }> = [];

  constructor(private readonly max: number) {}

  /** Slots taken. */
  get inUse(): number {
    return this.used;
  }

  /** Takes a slot: true once granted, false if `signal` aborted first (no slot is then held). */
  acquire(signal: AbortSignal): Promise<boolean> {
    if (signal.aborted) return Promise.resolve(false);
    if (this.used < this.max) {
      this.used++;
      return Promise.resolve(true);
    }
    return new Promise<boolean>((resolve) => {
      const waiter = {
        grant: () => {
          signal.removeEventListener('abort', onAbort);
          resolve(true);
        },
      };
      const onAbort = () => {
        const index = this.waiters.indexOf(waiter);
        if (index >= 0) this.waiters.splice(index, 1);
        resolve(false);
      };
      signal.addEventListener('abort', onAbort, { once: true });
      this.waiters.push(waiter);
    });
  }

  /** Returns a slot, handing it straight to the oldest waiter if there is one. */
  release(): void {
    const next = this.waiters.shift();
    if (next !== undefined) next.grant();
    else this.used = Math.max(0, this.used - 1);
  }
}
