import type { Logger } from 'effectively-once';

/** A child process's logger: warnings and errors to stderr (the parent keeps them in its log). */
export function stderrLogger(tag: string): Logger {
  const brief = (obj: object): string => {
    const err = (obj as { err?: unknown }).err;
    return err instanceof Error ? `${err.name}: ${err.message}` : '';
  };
  return {
    debug: () => undefined,
    info: () => undefined,
    warn: (obj, msg) => console.error(tag, 'warn', msg ?? '', brief(obj)),
    error: (obj, msg) => console.error(tag, 'error', msg ?? '', brief(obj)),
  };
}
