import fs from 'node:fs';
import path from 'node:path';
import { FailoverCluster } from '../../../kit/services/cluster/cluster.js';
import type { Replication } from '../../../kit/services/cluster/node.js';
import type { Logger } from '../../../src/types.js';
import { createTestDatabase, type TestDatabase } from '../../helpers/db.js';
import { RUNS_DIR } from '../../../kit/services/state.js';

/**
 * A private primary + standby (kit/services/cluster/cluster.ts) for one test file, under the
 * services' runs directory (so CI's leak check sees its processes), on the machine's
 * Postgres binaries: killing and promoting it disturbs no other test file.
 */
export async function startCluster(replication: Replication = 'sync'): Promise<FailoverCluster> {
  fs.mkdirSync(RUNS_DIR, { recursive: true });
  const root = fs.mkdtempSync(path.join(RUNS_DIR, 'failover-'));
  fs.chmodSync(root, 0o755); // the postgres user must reach the data dirs inside
  // EO_FAILOVER_LOG=1: what the cluster does (seeding, retries), on stderr.
  const log =
    process.env['EO_FAILOVER_LOG'] === '1'
      ? (line: string) => process.stderr.write(`[failover ${new Date().toISOString()}] ${line}\n`)
      : () => undefined;
  const cluster = await FailoverCluster.start(root, replication, log);
  const stop = cluster.stop.bind(cluster);
  cluster.stop = async () => {
    await stop();
    fs.rmSync(root, { recursive: true, force: true });
  };
  return cluster;
}

/** A schema on `url` (a cluster's proxy) and a pool bound to it. */
export function schemaOn(url: string, prefix: string): Promise<TestDatabase> {
  return createTestDatabase(prefix, { connectionString: url, max: 10 });
}

/** A logger that keeps what the consumer said (message, and the error's SQLSTATE or message). */
export function recordingLogger(): Logger & {
  lines: Array<{ level: string; msg: string; code: string | undefined }>;
  said(msg: string): boolean;
} {
  const lines: Array<{ level: string; msg: string; code: string | undefined }> = [];
  const record =
    (level: string) =>
    (obj: object, msg?: string): void => {
      const err = (obj as { err?: { code?: unknown; message?: unknown } }).err;
      const code = typeof err?.code === 'string' ? err.code : undefined;
      lines.push({ level, msg: msg ?? '', code: code ?? (err ? String(err.message) : undefined) });
    };
  return {
    lines,
    said: (msg) => lines.some((l) => l.msg.includes(msg)),
    debug: record('debug'),
    info: record('info'),
    warn: record('warn'),
    error: record('error'),
  };
}
