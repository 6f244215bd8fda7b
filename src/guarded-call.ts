import { LazyLinkedSignal } from './signals.js';

/** How a guarded call ended. */
export type GuardedResult =
  { kind: 'ok' } | { kind: 'timeout' } | { kind: 'error'; error: unknown };

const OK: GuardedResult = { kind: 'ok' };
const TIMEOUT: GuardedResult = { kind: 'timeout' };

/**
 * Runs user code with an abort signal linked to `parents` (and `abandonOn`) and an
 * optional deadline; `work` gets the signal through `link.signal`, created only if it
 * is read.
 *
 * Two ways to give up on code that does not return: on timeout the signal aborts and
 * the call resolves `timeout`; when `abandonOn` aborts (a shutdown's hard stop) the
 * signal aborts and the call resolves as an `error` with that signal's reason. Either
 * way the work's promise keeps running, so the caller must not reuse what it holds
 * (cancel its statement, destroy its connection).
 */
export function guardedCall(
  work: (link: LazyLinkedSignal) => Promise<void>,
  options: {
    timeoutMs: number;
    parents?: ReadonlyArray<AbortSignal | undefined>;
    /** When it aborts, the call is given up at once, as on timeout (not only told to stop). */
    abandonOn?: AbortSignal;
    timeoutReason: () => Error;
  },
): Promise<GuardedResult> {
  const { abandonOn } = options;
  const link = new LazyLinkedSignal(
    abandonOn === undefined ? (options.parents ?? []) : [abandonOn, ...(options.parents ?? [])],
  );
  // One promise settled by whichever comes first: no Promise.race and deadline promise per call.
  return new Promise<GuardedResult>((resolve) => {
    let timer: NodeJS.Timeout | undefined;
    let forget: (() => void) | undefined;
    let ended = false;
    const end = (result: GuardedResult): void => {
      if (ended) return;
      ended = true;
      if (timer !== undefined) clearTimeout(timer);
      forget?.();
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
    if (abandonOn !== undefined) {
      forget = whenAborted(abandonOn, () => {
        link.abort(abandonOn.reason);
        end({ kind: 'error', error: abandonOn.reason });
      });
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

/**
 * Callbacks per long-lived signal, behind one listener of its own: a listener added and
 * removed on the shutdown signal per message costs more than a Set entry.
 */
const waiting = new WeakMap<AbortSignal, Set<() => void>>();

/** Calls `callback` once `signal` aborts (at once if it has); returns how to forget it. */
function whenAborted(signal: AbortSignal, callback: () => void): () => void {
  if (signal.aborted) {
    queueMicrotask(callback);
    return () => undefined;
  }
  let callbacks = waiting.get(signal);
  if (callbacks === undefined) {
    const set = new Set<() => void>();
    callbacks = set;
    waiting.set(signal, set);
    signal.addEventListener(
      'abort',
      () => {
        for (const fn of [...set]) fn();
        set.clear();
      },
      { once: true },
    );
  }
  const entry = callbacks;
  entry.add(callback);
  return () => entry.delete(callback);
}
