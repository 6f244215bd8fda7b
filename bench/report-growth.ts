import { fmt } from './format.js';
import type { RunResult } from './protocol.js';
import { PRUNE_WHILE_CONSUMING } from './pruning.js';
import { EMPTY_TABLE, pairedRatio, variantOf, type ScenarioSummary } from './summary.js';

const ratio = (r: number | null): string => (r === null ? '–' : r.toFixed(2));
const DAY_MS = 86_400_000;

/**
 * The "dedup table growth" table: per scenario, msg/s with an empty dedup table, with M
 * rows of history, and with M rows while the consumer prunes them, each ×(x) the paired
 * per-round ratio; then what the pruner did. Empty when the bench ran no growth runs.
 */
export function renderGrowth(
  summary: readonly ScenarioSummary[],
  runs: readonly RunResult[],
): string[] {
  const grown = summary.filter((s) => s.dedupPreload > 0 && !s.pruning);
  if (grown.length === 0) return [];
  const pruned = summary.filter((s) => s.pruning);
  const rows = grown[0]?.dedupPreload ?? 0;
  const empty = (s: ScenarioSummary): ScenarioSummary | undefined =>
    summary.find((e) => e.scenario === s.scenario && e.dedupPreload === 0);
  const lines = [
    '',
    `| dedup table growth | msg/s empty table | msg/s with ${fmt(rows)} rows | ×(empty) |` +
      (pruned.length > 0
        ? ` msg/s with ${fmt(rows)} rows + pruning | ×(empty) | ×(${fmt(rows)} rows) |`
        : ''),
    `|---|--:|--:|--:|${pruned.length > 0 ? '--:|--:|--:|' : ''}`,
  ];
  for (const g of grown) {
    const withRows = variantOf(g);
    const p = pruned.find((s) => s.scenario === g.scenario);
    const pruning =
      p === undefined
        ? ' – | – | – |'
        : ` ${fmt(p.throughput)} | ${ratio(pairedRatio(runs, g.scenario, g.scenario, variantOf(p)))} | ` +
          `${ratio(pairedRatio(runs, g.scenario, g.scenario, variantOf(p), withRows))} |`;
    lines.push(
      `| (${g.scenario}) ${g.label} | ${fmt(empty(g)?.throughput)} | ${fmt(g.throughput)} | ` +
        `${ratio(pairedRatio(runs, g.scenario, g.scenario, withRows, EMPTY_TABLE))} |` +
        (pruned.length > 0 ? pruning : ''),
    );
  }
  if (pruned.length > 0) {
    lines.push(
      '',
      `Pruning: the consumer's own \`retention\` (olderThanMs ${PRUNE_WHILE_CONSUMING.olderThanMs / DAY_MS} days, ` +
        `intervalMs ${PRUNE_WHILE_CONSUMING.intervalMs}, default batchSize and dutyCycle) on the consumer's pool, over history 1 to 30 days old; ` +
        'the table is restored between runs. Medians over rounds:',
      '',
    );
    for (const p of pruned) {
      const n = p.notes;
      const left = n['pruneBacklogLeft'];
      lines.push(
        `- (${p.scenario}): ${fmt(n['prunedDuringDrain'])} rows deleted by the pruner during the drain ` +
          `(${fmt(n['prunedPerSecDuringDrain'])}/s), ${fmt(n['prunedRows'])} from the consumer's start to its stop; ` +
          `${fmt(left)} rows older than 7 days left at the end` +
          (left === 0 ? ' (the backlog ran out: part of the drain went unpruned)' : ''),
      );
    }
  }
  return lines;
}
