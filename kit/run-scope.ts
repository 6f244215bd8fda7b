/**
 * What every chaos run holds for its lifetime: an abort signal for its loops, the
 * cleanups of what it started (run in reverse), and SIGINT/SIGTERM handling that stops
 * everything and exits 130. One owner, so the three targets stop alike.
 */
export interface RunScope {
  readonly abort: AbortController;
  /** Register the stop of something just started; run last-in, first-out. */
  defer(fn: () => Promise<void>): void;
  /** Aborts, removes the signal handlers and runs the cleanups. */
  close(): Promise<void>;
}

export function openRunScope(say: (line: string) => void, what: string): RunScope {
  const abort = new AbortController();
  const cleanups: Array<() => Promise<void>> = [];
  const cleanup = async (): Promise<void> => {
    for (const fn of cleanups.splice(0).reverse())
      await fn().catch((e: unknown) => say(`cleanup: ${String(e)}`));
  };
  const onSignal = (signal: NodeJS.Signals): void => {
    say(`${signal}: stopping ${what}`);
    abort.abort();
    void cleanup().finally(() => process.exit(130));
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  return {
    abort,
    defer: (fn) => void cleanups.push(fn),
    close: async () => {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
      abort.abort();
      await cleanup();
    },
  };
}
