import type { DeadLetter } from './broker-api.js';
import type { Plan } from './plan.js';

/** The checker's verdict over the final state. */
export interface Verdict {
  /** Logical keys applied at least once. */
  applied: number;
  /** Logical keys applied more than once (counter > 1). */
  doubles: number;
  /**
   * Keys that ended neither applied nor dead-lettered in a quiescent run: acked without
   * their effect. Logical keys never applied count here even when dead-lettered.
   */
  lost: number;
  /** The keys `lost` counts. */
  lostKeys: string[];
  /** The same, in a run that timed out: maybe still being retried, maybe lost. */
  unsettled: number;
  /** Distinct keys that must be dead-lettered (poison, permanent faults) found in the dead-letter target. */
  deadLettered: number;
  /** Keys that must be dead-lettered whose effect was applied (must be 0). */
  poisonApplied: number;
  /** Dead letters of keys that must not be dead-lettered (a logical message, an unknown key). */
  misrouted: number;
  /** Dead letters whose error code is not among their key's expected codes. */
  wrongCode: number;
  /** Ledger rows; must equal N (one per applied effect). */
  ledgerRows: number;
  /** Kafka partitions' effects applied out of offset order (undefined: order not checked). */
  orderViolations: number | undefined;
  /** Keys with a counter row that the plan never sent (must be 0). */
  unknown: number;
  /** Human-readable problems, at most a few examples each. */
  problems: string[];
}

/** What the checker reads at the end of a run. */
export interface FinalState {
  counters: Map<string, number>;
  ledger: Map<string, number>;
  ledgerRows: number;
  deadLetters: DeadLetter[];
  /** Sum of the hot rows (2 per applied hot effect). */
  hotTotal: number;
  /** The run reached quiescence: nothing left to consume, so a missing key cannot come any more. */
  quiescent: boolean;
  /** Per-partition order (Kafka, one ordered stream per partition); undefined: not checked. */
  order?: { violations: number; examples: string[] } | undefined;
  /**
   * Dead letters were moved by the broker's redrive policy (Lambda mode), without the
   * adapter's error code: their codes are not checked (where they went still is).
   */
  uncodedDeadLetters?: boolean;
  /** Keys whose `floating` fault's late query ran outside the transaction that applied them. */
  floatingOutside?: string[];
}

/**
 * Every logical key's counter is exactly 1 and its ledger has exactly one row, and it
 * is not dead-lettered; every key that must be dead-lettered (poison, permanent
 * handler faults) has no counter or ledger row and is in the dead-letter target with
 * one of its expected error codes; nothing else is there; the hot rows add up to two
 * per applied hot effect; a floating query never ran outside the claim's transaction;
 * and, when checked, every partition's effects were applied in offset order.
 */
export function check(plan: Plan, state: FinalState): Verdict {
  const { counters, ledger, ledgerRows, deadLetters, quiescent } = state;
  const problems: string[] = [];
  const examples = (what: string, keys: string[]): void => {
    if (keys.length > 0)
      problems.push(
        `${what}: ${keys.length} (${keys.slice(0, 5).join(', ')}${keys.length > 5 ? ', ...' : ''})`,
      );
  };
  const codes = new Map<string, Array<string | undefined>>();
  for (const d of deadLetters) codes.set(d.key, [...(codes.get(d.key) ?? []), d.code]);

  const doubled: string[] = [];
  const never: string[] = [];
  const ledgerOff: string[] = [];
  for (const key of plan.keys) {
    const n = counters.get(key) ?? 0;
    if (n === 0) never.push(key);
    if (n > 1) doubled.push(`${key}×${n}`);
    if ((ledger.get(key) ?? 0) !== n)
      ledgerOff.push(`${key}: counter ${n}, ledger ${ledger.get(key) ?? 0}`);
  }
  const expected = plan.deadLetters;
  const deadApplied = [...expected.keys()].filter((k) => counters.has(k) || ledger.has(k));
  const logical = new Set(plan.keys);
  const unknown = [...counters.keys()].filter((k) => !logical.has(k) && !expected.has(k));
  const deadFound = [...expected.keys()].filter((k) => codes.has(k));
  const deadMissing = [...expected.keys()].filter((k) => !codes.has(k) && !deadApplied.includes(k));
  const misrouted = [...codes.keys()].filter((k) => !expected.has(k));
  const wrongCode: string[] = [];
  for (const key of state.uncodedDeadLetters === true ? [] : deadFound) {
    const allowed = expected.get(key)!.codes;
    const got = codes.get(key)!;
    if (got.some((c) => c === undefined || !allowed.includes(c)))
      wrongCode.push(
        `${key}: ${got.map((c) => c ?? 'no code').join('+')}, expected ${allowed.join(' or ')}`,
      );
  }
  // A key neither applied nor dead-lettered: lost once nothing is left to consume.
  const neverDead = never.filter((k) => !codes.has(k));

  examples('applied more than once', doubled);
  if (quiescent) {
    examples('never applied (acked without its effect)', neverDead);
    examples('neither applied nor dead-lettered (acked without a dead letter)', deadMissing);
  } else {
    examples('never applied by the deadline', neverDead);
    examples('not dead-lettered by the deadline', deadMissing);
  }
  examples('ledger rows differ from the counter', ledgerOff);
  examples('must be dead-lettered but was applied', deadApplied);
  examples('dead-lettered but must be applied (or never sent)', misrouted);
  examples('dead-lettered with an unexpected error code', wrongCode);
  examples('counter rows for keys never sent', unknown);
  examples(
    'a floating query ran outside the transaction that applied its key',
    state.floatingOutside ?? [],
  );
  if (state.order !== undefined && state.order.violations > 0)
    problems.push(
      `effects applied out of offset order: ${state.order.violations} (${state.order.examples.join('; ')})`,
    );
  if (ledgerRows !== plan.keys.length)
    problems.push(`ledger has ${ledgerRows} rows, expected ${plan.keys.length}`);
  const hotApplied = plan.faults
    .filter((f) => f.fault.kind === 'serialization')
    .reduce((sum, f) => sum + (counters.get(f.key) ?? 0), 0);
  if (state.hotTotal !== 2 * hotApplied)
    problems.push(
      `hot rows add up to ${state.hotTotal}, expected ${2 * hotApplied} (2 per applied hot effect)`,
    );

  return {
    applied: plan.keys.length - never.length,
    doubles: doubled.length,
    // A logical key dead-lettered instead of applied is lost (and misrouted) either way.
    lost: quiescent ? never.length + deadMissing.length : never.length - neverDead.length,
    lostKeys: quiescent ? [...never, ...deadMissing] : never.filter((k) => codes.has(k)),
    unsettled: quiescent ? 0 : neverDead.length + deadMissing.length,
    deadLettered: deadFound.length,
    poisonApplied: deadApplied.length,
    misrouted: misrouted.length,
    wrongCode: wrongCode.length,
    ledgerRows,
    orderViolations: state.order?.violations,
    unknown: unknown.length,
    problems,
  };
}
