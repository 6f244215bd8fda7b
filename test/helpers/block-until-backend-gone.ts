import { execFileSync } from 'node:child_process';
import { databaseUrl } from './env.js';

/** A child Node's script: polls a count(*) query until it says 0 (30 s bound). */
const POLL = `
const { Client } = require('pg');
const [url, sql, param] = process.argv.slice(1);
const deadline = Date.now() + 30000;
(async () => {
  const c = new Client({ connectionString: url });
  await c.connect();
  for (;;) {
    const { rows } = await c.query(sql, [param]);
    if (rows[0].n === 0) return c.end();
    if (Date.now() > deadline) { console.error('still ' + rows[0].n + ': ' + sql); process.exit(1); }
    await new Promise((r) => setTimeout(r, 20));
  }
})().catch((err) => { console.error(err); process.exit(1); });
`;

/**
 * Blocks this process's event loop, synchronously, until the server has ended backend
 * `pid` (a session the server times out sends its FATAL first, then exits). Meanwhile
 * pg cannot read that FATAL: the next statement sent on the session gets it as its
 * answer. Waits on a condition, not a fixed time; the poll runs in a child Node (pg is
 * this repository's dependency, resolved from the working directory), not psql.
 */
export function blockUntilBackendGone(pid: number): void {
  blockUntilNone('SELECT count(*)::int AS n FROM pg_stat_activity WHERE pid = $1', String(pid));
}

/**
 * The same, for the sessions of `applicationName` idle in a transaction: for a handler
 * that cannot ask its own backend's pid.
 */
export function blockUntilNoneIdleInTransaction(applicationName: string): void {
  blockUntilNone(
    "SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1 AND state LIKE 'idle in transaction%'",
    applicationName,
  );
}

function blockUntilNone(countSql: string, param: string): void {
  execFileSync(process.execPath, ['-e', POLL, databaseUrl(), countSql, param], {
    stdio: ['ignore', 'ignore', 'inherit'],
    timeout: 40_000,
  });
}
