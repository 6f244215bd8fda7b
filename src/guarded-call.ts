import { linkedAbort } from './signals.js';

/** How a guarded call ended. */
export type GuardedResult =
  { kind: 'ok' } | { kind: 'timeout' } | { kind: 'error'; error: unknown };

/**
 * Runs user code with an abort signal linked to `parents` and an optional deadline.
 * On timeout the signal aborts and the call is abandoned (its promise keeps running;
 * the caller must not reuse what it holds, e.g. destroy its connection).
 */
export async function guardedCall(
  work: (signal: AbortSignal) => Promise<void>,
  options: {
    timeoutMs: number;
    parents: ReadonlyArray<AbortSignal | undefined>;
    timeoutReason: () => Error;
  },
): Promise<GuardedResult> {
  const { controller, dispose } = linkedAbort(options.parents);
  let timer: NodeJS.Timeout | undefined;
  try {
    const settled = work(controller.signal).then(
      (): GuardedResult => ({ kind: 'ok' }),
      (error: unknown): GuardedResult => ({ kind: 'error', error }),
    );
    if (options.timeoutMs <= 0) return await settled;
    const deadline = new Promise<GuardedResult>((resolve) => {
      timer = setTimeout(() => {
        controller.abort(options.timeoutReason());
        resolve({ kind: 'timeout' });
      }, options.timeoutMs);
    });
    return await Promise.race([settled, deadline]);
  } finally {
    if (timer !== undefined) clearTimeout(timer);
    dispose();
  }
}
