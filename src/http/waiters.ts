/**
 * Bounds the requests of one endpoint that would wait on a key another of its requests
 * holds. A waiting retry holds a pool connection for up to `waitMs` (its claim blocks on
 * the original's row lock); a burst of retries of one slow request would otherwise take
 * every connection, and requests for other keys would time out waiting for the pool.
 * Only this process's requests are known here: a key held by another instance is found
 * by the claim itself, bounded by `waitMs`.
 */
export class KeyWaiters {
  /** Requests in flight per (scope, key): the first holds or claims it, the rest wait. */
  private readonly inFlight = new Map<string, number>();
  private waiting = 0;

  constructor(
    private readonly perKey: number,
    private readonly total: number,
  ) {}

  /**
   * Admits a request for `(scope, key)`: a function to call once it has been answered,
   * or undefined when it would wait beyond the bounds (answer it 409 at once).
   */
  enter(scope: string, key: string): (() => void) | undefined {
    const id = JSON.stringify([scope, key]);
    const ahead = this.inFlight.get(id) ?? 0;
    const waits = ahead > 0;
    if (waits && (ahead - 1 >= this.perKey || this.waiting >= this.total)) return undefined;
    this.inFlight.set(id, ahead + 1);
    if (waits) this.waiting++;
    let left = false;
    return () => {
      if (left) return;
      left = true;
      const remaining = (this.inFlight.get(id) ?? 1) - 1;
      if (remaining === 0) this.inFlight.delete(id);
      else this.inFlight.set(id, remaining);
      if (waits) this.waiting--;
    };
  }
}
