import { CONSUMER_LABELS } from './contenders.js';
import type { ConsumerResult, ConsumerTally } from './scenario.js';

/** Why a run of an effectively-once consumer contender is not clean (empty: clean). */
export function consumerFailures(result: ConsumerResult): string[] {
  const failures: string[] = [];
  const armed = result.killed.messages;
  if (result.kills !== armed)
    failures.push(`${result.kills} of ${armed} armed kills happened after the commit`);
  for (const [name, t] of [
    ['killed', result.killed],
    ['not killed', result.plain],
  ] as const) {
    if (t.doubles + t.lost > 0)
      failures.push(`${name} messages: ${t.doubles} doubles, ${t.lost} lost`);
  }
  if (result.backlog > 0) failures.push(`${result.backlog} messages never settled (acked)`);
  return failures;
}

function pair(t: ConsumerTally): string {
  return `${t.doubles} | ${t.lost}`;
}

/** The consumer comparison table, in markdown, straight from the results. */
export function consumerTable(results: ConsumerResult[], versions: Record<string, string>): string {
  const lines = [
    '| worker | wiring | kills landed | killed between commit and ack: doubles | lost | not killed: doubles | lost | left unacked |',
    '|---|---|---:|---:|---:|---:|---:|---:|',
  ];
  for (const r of results) {
    const label = CONSUMER_LABELS[r.contender];
    const library = `${label.library} ${versions[label.library] ?? ''}`.trim();
    const worker = label.effectivelyOnce
      ? `${library} + effectively-once ${versions['effectively-once'] ?? ''}`.trim()
      : library;
    lines.push(
      `| ${worker} | ${label.wiring} | ${r.kills}/${r.killed.messages} | ${pair(r.killed)} | ${pair(r.plain)} | ${r.backlog} |`,
    );
  }
  return lines.join('\n');
}
