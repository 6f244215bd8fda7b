import type { Pool } from 'pg';
import { CommitUnknownError, ReplicaUnseenError } from '../errors.js';
import type { Logger } from '../types.js';
import type { ResolvedReplicaSafe } from './options.js';
import { ReplicaPoller, type ReplicaReport, type ReplicaStatus, type Ticket } from './poller.js';

/**
 * What a door holds when `replicaSafe` is on: the claim transaction's driver takes a
 * {@link Ticket} before the transaction opens and, once the door has its verdict,
 * {@link confirm}s it before the outward step; the relay does the same around its read.
 */
export interface ReplicaGuard {
  /** `synchronous_commit` for the claim's transaction (`SET LOCAL`), in that mode. */
  readonly synchronousCommit: 'on' | 'remote_apply' | undefined;
  begin(): Ticket | undefined;
  /**
   * Resolves once the standby has every commit made before {@link begin} (undefined), or
   * with the error the outward step must become (unconfirmed under `hold`): an unknown
   * COMMIT, its cause a `ReplicaUnconfirmedError`.
   */
  confirm(ticket: Ticket | undefined, key: string): Promise<CommitUnknownError | undefined>;
  /** At the door's start: throws `ReplicaUnseenError` when the standby cannot be seen. */
  check(): Promise<void>;
  /** The watched standby's state, for a health check (undefined before the first poll). */
  status(): ReplicaStatus;
  /** Subscribes to the standby's state changes. */
  onReport(listener: (report: ReplicaReport) => void): () => void;
  /** The door stopped: the poller closes with its last user. */
  close(): void;
}

interface Shared {
  poller: ReplicaPoller;
  users: number;
}

// One poller per pool and setting, shared by every door on that pool: one query per
// tick serves all of their pending acks.
const pollers = new WeakMap<Pool, Map<string, Shared>>();

/** The guard of one door, or undefined when `replicaSafe` is off. */
export function replicaGuard(
  pool: Pool,
  cfg: ResolvedReplicaSafe | undefined,
  logger: Logger,
): ReplicaGuard | undefined {
  if (cfg === undefined) return undefined;
  if (cfg.mode === 'synchronous-commit') return syncCommitGuard(pool, cfg.level);
  const id = JSON.stringify(cfg);
  let byCfg = pollers.get(pool);
  if (byCfg === undefined) pollers.set(pool, (byCfg = new Map<string, Shared>()));
  let shared = byCfg.get(id);
  if (shared === undefined)
    byCfg.set(id, (shared = { poller: new ReplicaPoller(pool, cfg), users: 0 }));
  shared.users++;
  const { poller } = shared;
  const entry = shared;
  const unsubscribe = poller.onReport((report) => {
    const line = { replica: report.state, detail: report.detail, lagBytes: report.lagBytes };
    if (report.state === 'streaming')
      logger.info(line, 'effectively-once: the standby confirms commits');
    else
      logger.warn(
        line,
        cfg.onLag === 'degrade'
          ? 'effectively-once: the standby does not confirm commits: acknowledging on the primary alone'
          : 'effectively-once: the standby does not confirm commits: holding acknowledgements',
      );
  });
  let closed = false;
  return {
    synchronousCommit: undefined,
    begin: () => poller.begin(),
    async confirm(ticket, key) {
      if (ticket === undefined) return undefined;
      const result = await poller.wait(ticket);
      if (result.kind === 'unconfirmed') return new CommitUnknownError(key, result.error);
      return undefined;
    },
    check: () => poller.check(),
    status: () => ({ state: poller.current, lagBytes: poller.lagBytes }),
    onReport: (listener) => poller.onReport(listener),
    close() {
      if (closed) return;
      closed = true;
      unsubscribe();
      if (--entry.users > 0) return;
      byCfg.delete(id);
      poller.close();
    },
  };
}

function syncCommitGuard(pool: Pool, level: 'flush' | 'apply'): ReplicaGuard {
  return {
    synchronousCommit: level === 'apply' ? 'remote_apply' : 'on',
    begin: () => undefined,
    confirm: () => Promise.resolve(undefined),
    async check() {
      const { rows } = await pool.query<{ names: string }>(
        `SELECT current_setting('synchronous_standby_names') AS names`,
      );
      if (rows[0]!.names.trim() === '')
        throw new ReplicaUnseenError(
          "synchronous_standby_names is empty: mode 'synchronous-commit' would wait for no standby",
        );
    },
    status: () => ({ state: undefined, lagBytes: undefined }),
    onReport: () => () => undefined,
    close: () => undefined,
  };
}
