/** Polls `condition` until it returns true (or a truthy value), or fails after `timeoutMs`. */
export async function waitFor<T>(
  condition: () => T | Promise<T>,
  {
    timeoutMs = 20_000,
    intervalMs = 25,
    what = 'condition',
  }: { timeoutMs?: number; intervalMs?: number; what?: string } = {},
): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await condition();
      if (value) return value;
    } catch (error) {
      last = error;
    }
    if (Date.now() > deadline) {
      throw new Error(
        `Timed out after ${timeoutMs} ms waiting for ${what}${last instanceof Error ? `: ${last.message}` : ''}`,
      );
    }
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

/** Resolves after `ms`. Use only to let something *not* happen; poll with waitFor otherwise. */
export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** Outcome of `promise`, or 'hung' if it has not settled after `ms` (a liveness bound, not a timing). */
export function within<T>(promise: Promise<T>, ms: number): Promise<T | 'hung'> {
  let timer: NodeJS.Timeout | undefined;
  const hung = new Promise<'hung'>((resolve) => (timer = setTimeout(() => resolve('hung'), ms)));
  return Promise.race([promise, hung]).finally(() => clearTimeout(timer));
}
