/**
 * The payment server processes' side of spawn.ts's protocol (child.ts, and the chaos
 * harness's chaos/http/child.ts): settings from the environment, events as JSON lines
 * on stdout, written synchronously so they survive a SIGKILL.
 */
import { writeSync } from 'node:fs';
import pg from 'pg';

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

/**
 * The server's pool: EO_HTTP_DATABASE_URL with EO_HTTP_SCHEMA as search_path (the
 * payment tables live there). Errors of idle clients are ignored: the tests kill
 * backends and restart Postgres under it.
 */
export function envPool(): { pool: pg.Pool; schema: string } {
  const schema = env('EO_HTTP_SCHEMA');
  const pool = new pg.Pool({
    connectionString: env('EO_HTTP_DATABASE_URL'),
    options: `-c search_path=${schema}`,
    max: 20,
  });
  pool.on('error', () => undefined);
  return { pool, schema };
}
