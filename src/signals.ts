/**
 * An AbortController that also aborts when any of `parents` aborts. Written by hand
 * rather than with `AbortSignal.any` so listeners are removed when the child is
 * disposed: long-lived parents (the shutdown signal) would otherwise accumulate one
 * listener per message.
 */
export function linkedAbort(parents: ReadonlyArray<AbortSignal | undefined>): {
  controller: AbortController;
  dispose: () => void;
} {
  const controller = new AbortController();
  const cleanups: Array<() => void> = [];
  for (const parent of parents) {
    if (parent === undefined) continue;
    if (parent.aborted) {
      controller.abort(parent.reason);
      break;
    }
    const onAbort = () => controller.abort(parent.reason);
    parent.addEventListener('abort', onAbort, { once: true });
    cleanups.push(() => parent.removeEventListener('abort', onAbort));
  }
  return { controller, dispose: () => cleanups.forEach((c) => c()) };
}
