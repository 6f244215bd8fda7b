import { ConfigurationError } from '../errors.js';
import { intOption } from '../option-checks.js';

/**
 * How far the standby must have the commit: `flush` (on its disk: a promotion replays
 * everything flushed before it accepts writes, so the commit survives a failover to it)
 * or `apply` (also replayed: visible to reads on the standby, at the cost of its replay
 * lag). Default `flush`: what a failover needs, no more.
 */
export type ReplicaLevel = 'flush' | 'apply';

/**
 * Hold the door's outward step (the broker ack, the HTTP answer, the relay's publish)
 * until the claim's commit is on the standby a failover would promote, while the rest of
 * the database stays asynchronous. See docs/replica-safe.md.
 */
export type ReplicaSafeOptions = ReplicaWaitOptions | ReplicaSyncCommitOptions;

/** Wait for the standby's position, read from `pg_stat_replication` on the primary. */
export interface ReplicaWaitOptions {
  /** Default `'wait'`. */
  mode?: 'wait';
  /**
   * Which standbys count: `names`, their `application_name`s (absent: every standby
   * connected to the primary), of which `count` (default 1) must have the commit.
   */
  standby?: { names?: readonly string[]; count?: number };
  /** Default `'flush'` (see {@link ReplicaLevel}). */
  level?: ReplicaLevel;
  /** Longest wait for the standby, in ms: 1 to 3 600 000. Default 5000. */
  maxWaitMs?: number;
  /**
   * What a standby that lags past `maxWaitMs`, or is gone, means: `'hold'` (default) the
   * outward step is withheld (the delivery is retried, the HTTP client gets 503
   * outcome-unknown, the relay publishes later), so deliveries back up behind it;
   * `'degrade'` the step goes ahead on the primary's word, with a `replica` warning.
   */
  onLag?: 'hold' | 'degrade';
  /** Pause between two polls while acks wait, in ms: 1 to 1000. Default 5. */
  pollIntervalMs?: number;
}

/**
 * Raise `synchronous_commit` for the claim's transactions only (`SET LOCAL`, the rest of
 * the database untouched): COMMIT itself waits for the synchronous standbys the operator
 * named in `synchronous_standby_names`. `level` `flush` → `on`, `apply` → `remote_apply`.
 */
export interface ReplicaSyncCommitOptions {
  /** Selects this mode (the default mode is the LSN wait). */
  mode: 'synchronous-commit';
  /** Default `'flush'`. */
  level?: ReplicaLevel;
}

/** {@link ReplicaSafeOptions} with defaults filled in. */
export type ResolvedReplicaSafe =
  | {
      mode: 'wait';
      names: readonly string[] | undefined;
      count: number;
      level: ReplicaLevel;
      maxWaitMs: number;
      onLag: 'hold' | 'degrade';
      pollIntervalMs: number;
    }
  | { mode: 'synchronous-commit'; level: ReplicaLevel };

const LEVELS: readonly ReplicaLevel[] = ['flush', 'apply'];

/** Checks `replicaSafe` (absent or `false`: off) and fills in its defaults. */
export function resolveReplicaSafe(
  value: ReplicaSafeOptions | false | undefined,
): ResolvedReplicaSafe | undefined {
  if (value === undefined || value === false) return undefined;
  if (typeof value !== 'object' || value === null)
    throw new ConfigurationError('replicaSafe', 'must be an object or false');
  const level = value.level ?? 'flush';
  if (!LEVELS.includes(level))
    throw new ConfigurationError('replicaSafe.level', `must be one of ${LEVELS.join(', ')}`, {
      level,
    });
  if (value.mode === 'synchronous-commit') return { mode: 'synchronous-commit', level };
  if (value.mode !== undefined && value.mode !== 'wait')
    throw new ConfigurationError('replicaSafe.mode', "must be 'wait' or 'synchronous-commit'", {
      mode: (value as { mode: unknown }).mode,
    });
  const names = value.standby?.names;
  if (
    names !== undefined &&
    (!Array.isArray(names) ||
      names.length === 0 ||
      names.some((n) => typeof n !== 'string' || n === ''))
  )
    throw new ConfigurationError('replicaSafe.standby.names', 'must be non-empty strings');
  const onLag = value.onLag ?? 'hold';
  if (onLag !== 'hold' && onLag !== 'degrade')
    throw new ConfigurationError('replicaSafe.onLag', "must be 'hold' or 'degrade'", { onLag });
  return {
    mode: 'wait',
    names,
    count: intOption('replicaSafe.standby.count', value.standby?.count, 1, 1, 64),
    level,
    maxWaitMs: intOption('replicaSafe.maxWaitMs', value.maxWaitMs, 5000, 1, 3_600_000),
    onLag,
    pollIntervalMs: intOption('replicaSafe.pollIntervalMs', value.pollIntervalMs, 5, 1, 1000),
  };
}
