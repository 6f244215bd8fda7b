/**
 * An abort signal that also aborts when any of `parents` aborts, created only when
 * someone reads it: most handlers never look at their signal, and an AbortController
 * plus a listener on every parent per message is measurable in the hot path. Written
 * by hand rather than with `AbortSignal.any` so listeners are removed on dispose:
 * long-lived parents (the shutdown signal) would otherwise gain one per message.
 */
export class LazyLinkedSignal {
  private controller: AbortController | undefined;
  private readonly cleanups: Array<() => void> = [];
  private ownReason: { reason: unknown } | undefined;
  private disposed = false;

  constructor(private readonly parents: ReadonlyArray<AbortSignal | undefined>) {}

  /** The linked signal (created on first read). */
  get signal(): AbortSignal {
    if (this.controller !== undefined) return this.controller.signal;
    const controller = new AbortController();
    this.controller = controller;
    if (this.ownReason !== undefined) {
      controller.abort(this.ownReason.reason);
      return controller.signal;
    }
    // Read after the call ended: linking now would leave listeners nobody removes.
    if (this.disposed) return controller.signal;
    for (const parent of this.parents) {
      if (parent === undefined) continue;
      if (parent.aborted) {
        controller.abort(parent.reason);
        break;
      }
      const onAbort = () => controller.abort(parent.reason);
      parent.addEventListener('abort', onAbort, { once: true });
      this.cleanups.push(() => parent.removeEventListener('abort', onAbort));
    }
    return controller.signal;
  }

  /** Aborts the signal now, or when it is first read; a no-op once it is aborted. */
  abort(reason: unknown): void {
    this.ownReason ??= { reason };
    this.controller?.abort(reason);
  }

  /** Removes the listeners on the parents. */
  dispose(): void {
    this.disposed = true;
    for (const cleanup of this.cleanups) cleanup();
    this.cleanups.length = 0;
  }
}
