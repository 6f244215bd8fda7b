import { CONTENDER_LABELS } from './contenders.js';
import type { ConcurrentTally, ContenderResult, Tally } from './scenario.js';

/** Why a run of effectively-once is not clean (empty: clean). */
export function effectivelyOnceFailures(result: ContenderResult): string[] {
  const failures: string[] = [];
  const armed = result.killed.payments;
  if (result.kills !== armed)
    failures.push(`${result.kills} of ${armed} armed kills happened after COMMIT`);
  for (const [name, t] of [
    ['killed', result.killed],
    ['dropped', result.dropped],
    ['plain', result.plain],
  ] as const) {
    if (t.doubles + t.stuck + t.lost + t.unanswered > 0)
      failures.push(
        `${name} payments: ${t.doubles} doubles, ${t.stuck} stuck, ${t.lost} answered without a charge, ${t.unanswered} neither`,
      );
  }
  for (const [name, c] of [
    ['one process', result.oneProcess],
    ['two processes', result.twoProcesses],
  ] as const) {
    if (c.charges !== 1 || c.answered2xx !== c.requests)
      failures.push(`concurrent, ${name}: ${burstCell(c)}`);
  }
  return failures;
}

function burstCell(c: ConcurrentTally): string {
  const charges = `${c.charges} charge${c.charges === 1 ? '' : 's'}`;
  return `${charges}, ${c.answered2xx}/${c.requests} answered 2xx`;
}

function pair(t: Tally): string {
  const extra = [
    t.lost > 0 ? `${t.lost} answered, never charged` : '',
    t.unanswered > 0 ? `${t.unanswered} neither` : '',
  ].filter(Boolean);
  return `${t.doubles} | ${t.stuck}${extra.length > 0 ? ` (${extra.join(', ')})` : ''}`;
}

/** The comparison table, in markdown, straight from the results. */
export function markdownTable(
  results: ContenderResult[],
  versions: Record<string, string>,
  concurrent: number,
): string {
  const lines = [
    `| middleware | store | killed after COMMIT: doubles | stuck | answer dropped, server alive: doubles | stuck | ${concurrent} identical at once, 1 process | ${concurrent} identical at once, 2 processes |`,
    '|---|---|---:|---:|---:|---:|---|---|',
  ];
  for (const r of results) {
    const label = CONTENDER_LABELS[r.contender];
    const version = versions[label.middleware.split('/http')[0] ?? ''] ?? '';
    const plainNote =
      r.plain.doubles + r.plain.stuck + r.plain.lost + r.plain.unanswered > 0
        ? ` (unarmed payments: ${pair(r.plain)})`
        : '';
    lines.push(
      `| ${label.middleware}${version ? ` ${version}` : ''} | ${label.store}${plainNote} | ${pair(r.killed)} | ${pair(r.dropped)} | ${burstCell(r.oneProcess)} | ${burstCell(r.twoProcesses)} |`,
    );
  }
  return lines.join('\n');
}
