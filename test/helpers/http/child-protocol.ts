/**
 * The payment server processes' side of spawn.ts's protocol (child.ts, and the chaos
 * harness's chaos/http/child.ts): settings from the environment, events as JSON lines
 * on stdout, written synchronously so they survive a SIGKILL.
 */
import { writeSync } from 'node:fs';

/** An environment variable, or `fallback`; throws when neither is there. */
export function env(name: string, fallback?: string): string {
  const value = process.env[name] ?? fallback;
  if (value === undefined) throw new Error(`${name} is not set`);
  return value;
}

/** One event line on stdout (`ready`, `committed`). */
export function emit(event: Record<string, unknown>): void {
  writeSync(1, `${JSON.stringify(event)}\n`);
}
