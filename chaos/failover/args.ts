import { intOption, UsageError } from '../../kit/args.js';
import type { Replication } from '../../kit/services/cluster/node.js';

/** `--failovers N` and `--replication sync|async`, as every target takes them. */
export function failoverArgs(
  rawFailovers: string | undefined,
  rawReplication: string | undefined,
): { failovers: number; replication: Replication } {
  const failovers = intOption('failovers', rawFailovers, 0, 0, 100);
  const replication = rawReplication ?? 'sync';
  if (replication !== 'sync' && replication !== 'async')
    throw new UsageError('--replication must be sync or async');
  if (rawReplication !== undefined && failovers === 0)
    throw new UsageError('--replication is for runs with --failovers');
  if (failovers > 0 && process.env['DATABASE_URL'])
    throw new UsageError('--failovers starts a Postgres cluster of its own: unset DATABASE_URL');
  return { failovers, replication };
}
