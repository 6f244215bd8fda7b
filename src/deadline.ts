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

/**
 * `work`, or a rejection with `signal.reason` as soon as `signal` aborts (at once if it
 * has). For what the caller must stop waiting on without being able to stop it (a user
 * hook, a read from a client): `work` goes on, its later outcome ignored.
 */
export function untilAborted<T>(work: T | PromiseLike<T>, signal: AbortSignal): Promise<T> {
  const running = Promise.resolve(work);
  running.catch(() => undefined);
  if (signal.aborted) return Promise.reject(signal.reason as Error);
  let onAbort: () => void = () => undefined;
  const aborted = new Promise<never>((_, reject) => {
    onAbort = () => reject(signal.reason as Error);
    signal.addEventListener('abort', onAbort, { once: true });
  });
  return Promise.race([running, aborted]).finally(() =>
    signal.removeEventListener('abort', onAbort),
  );
}

/**
 * A timeout (`configured` ms, 0 for none) cut to end by `deadline` (ms since the epoch;
 * undefined: none): the shorter of the two, or `'passed'` when the deadline has come.
 */
export function timeoutUntil(
  configured: number,
  deadline: number | undefined,
  now: number = Date.now(),
): number | 'passed' {
  if (deadline === undefined) return configured;
  const left = Math.floor(deadline - now);
  if (left <= 0) return 'passed';
  return configured > 0 ? Math.min(configured, left) : left;
}
