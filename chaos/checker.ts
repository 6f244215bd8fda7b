import type { Plan } from './plan.js';

/** The checker's verdict over the final state. */
export interface Verdict {
  /** Logical keys applied at least once. */
  applied: number;
  /** Logical keys applied more than once (counter > 1). */
  doubles: number;
  /** Logical keys never applied. */
  lost: number;
  /** Distinct poison keys found in the dead-letter target. */
  deadLettered: number;
  /** Poison keys whose effect was applied (must be 0). */
  poisonApplied: number;
  /** Dead letters that are not poison (a logical message sent to the dead-letter target). */
  misrouted: number;
  /** Ledger rows; must equal N (one per applied effect). */
  ledgerRows: number;
  /** Keys with a counter row that the plan never sent (must be 0). */
  unknown: number;
  /** Human-readable problems, at most a few examples each. */
  problems: string[];
}

/**
 * Every logical key's counter is exactly 1 and its ledger has exactly one row; no
 * poison key has a counter row or a ledger row; every poison key is in the dead-letter
 * target and nothing else is.
 */
export function check(
  plan: Plan,
  counters: Map<string, number>,
  ledger: Map<string, number>,
  ledgerRows: number,
  deadLetterKeys: string[],
): Verdict {
  const problems: string[] = [];
  const examples = (what: string, keys: string[]): void => {
    if (keys.length > 0)
      problems.push(
        `${what}: ${keys.length} (${keys.slice(0, 5).join(', ')}${keys.length > 5 ? ', ...' : ''})`,
      );
  };
  const doubled: string[] = [];
  const lost: string[] = [];
  const ledgerOff: string[] = [];
  for (const key of plan.keys) {
    const n = counters.get(key) ?? 0;
    if (n === 0) lost.push(key);
    if (n > 1) doubled.push(`${key}×${n}`);
    if ((ledger.get(key) ?? 0) !== n)
      ledgerOff.push(`${key}: counter ${n}, ledger ${ledger.get(key) ?? 0}`);
  }
  const poison = new Set(plan.poisonKeys);
  const poisonApplied = plan.poisonKeys.filter((k) => counters.has(k) || ledger.has(k));
  const logical = new Set(plan.keys);
  const unknown = [...counters.keys()].filter((k) => !logical.has(k) && !poison.has(k));
  const dead = new Set(deadLetterKeys);
  const deadPoison = plan.poisonKeys.filter((k) => dead.has(k));
  const missingPoison = plan.poisonKeys.filter((k) => !dead.has(k));
  const misrouted = [...dead].filter((k) => !poison.has(k));

  examples('applied more than once', doubled);
  examples('never applied', lost);
  examples('ledger rows differ from the counter', ledgerOff);
  examples('poison applied', poisonApplied);
  examples('poison not dead-lettered', missingPoison);
  examples('dead-lettered but not poison', misrouted);
  examples('counter rows for keys never sent', unknown);
  if (ledgerRows !== plan.keys.length)
    problems.push(`ledger has ${ledgerRows} rows, expected ${plan.keys.length}`);

  return {
    applied: plan.keys.length - lost.length,
    doubles: doubled.length,
    lost: lost.length,
    deadLettered: deadPoison.length,
    poisonApplied: poisonApplied.length,
    misrouted: misrouted.length,
    ledgerRows,
    unknown: unknown.length,
    problems,
  };
}
