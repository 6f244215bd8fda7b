import { LazyLinkedSignal } from './signals.js';

/** How a guarded call ended. */
export type GuardedResult =
  { kind: 'ok' } | { kind: 'timeout' } | { kind: 'error'; error: unknown };

/**
 * Runs user code with an abort signal linked to `parents` and an optional deadline;
 * `work` gets the signal through `link.signal`, created only if it is read.
 * On timeout the signal aborts and the call is abandoned (its promise keeps running;
 * the caller must not reuse what it holds, e.g. destroy its connection).
 */
export async function guardedCall(
  work: (link: LazyLinkedSignal) => Promise<void>,
  options: {
    timeoutMs: number;
    parents: ReadonlyArray<AbortSignal | undefined>;
    timeoutReason: () => Error;
  },
): Promise<GuardedResult> {
  const link = new LazyLinkedSignal(options.parents);
  let timer: NodeJS.Timeout | undefined;
  try {
    const settled = work(link).then(
      (): GuardedResult => ({ kind: 'ok' }),
      (error: unknown): GuardedResult => ({ kind: 'error', error }),
    );
    if (options.timeoutMs <= 0) return await settled;
    const deadline = new Promise<GuardedResult>((resolve) => {
      timer = setTimeout(() => {
        link.abort(options.timeoutReason());
        resolve({ kind: 'timeout' });
      }, options.timeoutMs);
    });
    return await Promise.race([settled, deadline]);
  } finally {
    if (timer !== undefined) clearTimeout(timer);
    link.dispose();
  }
}
