import type { FailoverAccount } from './accounting.js';
import { REPLICA_SAFE_ENV } from './replica-safe.js';

/** What a run's `--failovers` did, as every target reports it (accounting.ts). */
export interface FailoverResult {
  account: FailoverAccount;
  /** Lost keys that vanished with a dead primary under async replication (the documented window). */
  windowLost: number;
  /** The workers' EO_COMMIT_UNKNOWN events: each retried, so settled by the redelivery (broker runs only). */
  commitUnknownRetries?: number;
}

/**
 * failovers=N replication=..., the unknown COMMITs and how they were settled, what
 * vanished: the same fields on every target's line.
 */
export function failoverFields(f: FailoverResult): string[] {
  const u = f.account.unknown;
  return [
    `failovers=${f.account.failovers}`,
    `replication=${f.account.replication}`,
    ...(process.env[REPLICA_SAFE_ENV] === '1' ? ['replica_safe=on'] : []),
    `unknown_commits=${u.committed + u.aborted + u['in progress'] + u['never replicated']}`,
    `pg_xact_status=committed:${u.committed},aborted:${u.aborted},never_replicated:${u['never replicated']}`,
    ...(f.commitUnknownRetries === undefined
      ? []
      : [`commit_unknown_retries=${f.commitUnknownRetries}`]),
    `vanished=${f.account.vanishedRows}`,
    `window_lost=${f.windowLost}`,
  ];
}
