/**
 * Waits for `work` until `signal` aborts (a deadline): true when `work` settled first
 * (fulfilled or rejected: its result stays the caller's to read), false when the deadline
 * came first, and at once if it already had. Never rejects; `work` goes on either way.
 */
export function settlesBefore(work: Promise<unknown>, signal: AbortSignal): Promise<boolean> {
  if (signal.aborted) return Promise.resolve(false);
  return new Promise<boolean>((resolve) => {
    const onAbort = (): void => resolve(false);
    signal.addEventListener('abort', onAbort, { once: true });
    void work.then(
      () => {
        signal.removeEventListener('abort', onAbort);
        resolve(true);
      },
      () => {
        signal.removeEventListener('abort', onAbort);
        resolve(true);
      },
    );
  });
}
