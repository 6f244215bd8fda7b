/**
 * Pruning the dedup table from a scheduled job (cron, a Kubernetes CronJob) instead of
 * the consumer's `retention` option. The window must outlast the longest way a message
 * can come back (docs/keys-and-the-dedup-window.md); a key pruned too early lets a late
 * redelivery apply its effect again.
 *
 *   DATABASE_URL=postgres://… npx tsx examples/prune-job.ts
 */
import { pathToFileURL } from 'node:url';
import pg from 'pg';
import { prune } from 'effectively-once';

/** Prunes the `orders` consumer's keys older than 14 days; resolves with how many. */
export async function main({ env = process.env }: { env?: NodeJS.ProcessEnv } = {}) {
  const pool = new pg.Pool({ connectionString: env.DATABASE_URL });
  try {
    // #region prune
    const deleted = await prune(pool, {
      olderThan: 14 * 24 * 3600_000, // ms ago (or a Date); never a key before its own expiry
      consumer: 'orders', // this consumer's keys only; omit for every consumer
      batchSize: 1000, // rows per DELETE: short transactions, no long locks
      dutyCycle: 0.5, // wait as long as each batch took: claims keep their share
    });
    // #endregion
    return deleted;
  } finally {
    await pool.end();
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  console.log(`pruned ${await main()} dedup rows`);
}
