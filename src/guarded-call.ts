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
const OK: GuardedResult = { kind: 'ok' };
const TIMEOUT: GuardedResult = { kind: 'timeout' };

export function guardedCall(
  work: (link: LazyLinkedSignal) => Promise<void>,
  options: {
    timeoutMs: number;
    parents: ReadonlyArray<AbortSignal | undefined>;
    timeoutReason: () => Error;
  },
): Promise<GuardedResult> {
  const link = new LazyLinkedSignal(options.parents);
  // One promise settled by whichever comes first: no Promise.race and deadline promise per call.
  return new Promise<GuardedResult>((resolve) => {
    let timer: NodeJS.Timeout | undefined;
    const end = (result: GuardedResult): void => {
      if (timer !== undefined) clearTimeout(timer);
      link.dispose();
      resolve(result);
    };
    if (options.timeoutMs > 0) {
      timer = setTimeout(() => {
        timer = undefined;
        link.abort(options.timeoutReason());
        end(TIMEOUT);
      }, options.timeoutMs);
    }
    let running: Promise<void>;
    try {
      running = work(link);
    } catch (error) {
      end({ kind: 'error', error });
      return;
    }
    running.then(
      () => end(OK),
      (error: unknown) => end({ kind: 'error', error }),
    );
  });
}
