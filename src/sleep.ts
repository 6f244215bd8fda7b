/**
 * Resolves after `ms`, or at once when `signal` aborts (or already has); never rejects.
 * Always through a timer, even for 0 ms: a retry loop with a zero backoff still yields
 * to the event loop instead of spinning on microtasks.
 */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const done = (): void => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });
}
