import { fmt } from './format.js';
import { FLAT_CRITERION, memoryVerdict, type QuarterGrowth } from './memory-series.js';
import type { RunResult } from './protocol.js';

const growthText = (name: string, g: QuarterGrowth): string =>
  g.flat === null
    ? `${name}: too few samples`
    : `${name} ${fmt(g.secondQuarterMb, 1)} → ${fmt(g.lastQuarterMb, 1)} MB ` +
      `(${(g.growthMb ?? 0) >= 0 ? '+' : ''}${fmt(g.growthMb, 1)} MB, ${g.flat ? 'flat' : 'growing'})`;

/**
 * The memory run's section (`--memory-run`): per run, RSS and heapUsed at every 5 % of
 * the messages (after a full GC), the peaks of the 1 s samples in between, and the
 * verdict of the second quarter against the last.
 */
export function renderMemory(runs: readonly RunResult[]): string[] {
  const lines: string[] = [];
  for (const run of runs) {
    const m = run.memory;
    if (m === undefined) continue;
    const verdict = memoryVerdict(m.samples);
    lines.push(
      '',
      `Memory over the drain, (${run.scenario}) round ${run.round}${run.dedupPreload > 0 ? ` with ${fmt(run.dedupPreload)} dedup rows` : ''}, ` +
        `${fmt(run.messages)} messages: the scenario process, ${fmt(m.rssBeforePrefillMb, 1)} MB RSS before the pre-fill ` +
        `(done by a process of its own), sampled from just before the scenario starts (after a full GC); ` +
        `the msg/s clock started at ${fmt(m.clockStartS, 1)} s. ${m.samples.length} samples in the JSON (every 5 % after a full GC, and every second without one).`,
      '',
      '| progress % | elapsed s | RSS MB after GC | heap MB after GC | peak RSS MB since the row before | peak heap MB |',
      '|--:|--:|--:|--:|--:|--:|',
    );
    let peakRss = 0;
    let peakHeap = 0;
    for (const s of m.samples) {
      if (s.trigger === 'time') {
        peakRss = Math.max(peakRss, s.rssMb);
        peakHeap = Math.max(peakHeap, s.heapUsedMb);
        continue;
      }
      const label = s.trigger === 'end' ? 'after stop' : fmt(s.progressPct);
      const peaks = peakRss > 0 ? `${fmt(peakRss, 1)} | ${fmt(peakHeap, 1)}` : '– | –';
      lines.push(
        `| ${label} | ${fmt(s.elapsedS, 1)} | ${fmt(s.rssMb, 1)} | ${fmt(s.heapUsedMb, 1)} | ${peaks} |`,
      );
      peakRss = 0;
      peakHeap = 0;
    }
    lines.push(
      '',
      `Memory verdict: **${verdict.flat === null ? 'not enough samples' : verdict.flat ? 'flat' : 'not flat'}**: ` +
        `medians after GC, second quarter → last quarter: ${growthText('RSS', verdict.rss)}; ${growthText('heapUsed', verdict.heapUsed)}. ` +
        `Criterion: ${FLAT_CRITERION}.`,
    );
  }
  return lines;
}
