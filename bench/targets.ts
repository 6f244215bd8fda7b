import type { BrokerName } from '../kit/services/private.js';
import type { ScenarioId } from './scenarios.js';

/** A throughput ratio issue 7 asks for: `numerator >= min x denominator`. */
export interface Target {
  numerator: ScenarioId;
  denominator: ScenarioId;
  min: number;
  why: string;
}

const BOTH: Target[] = [
  { numerator: 'b', denominator: 'f', min: 1.5, why: 'per-message ahead of the inbox pattern' },
  { numerator: 'c', denominator: 'f', min: 5, why: 'batch mode far ahead of the inbox pattern' },
];

export const TARGETS: Record<BrokerName, Target[]> = {
  sqs: [
    {
      numerator: 'b',
      denominator: 'a',
      min: 1.0,
      why: 'exactly-once per message as fast as the at-least-once worker',
    },
    { numerator: 'c', denominator: 'a', min: 2, why: 'batch mode twice the at-least-once worker' },
    { numerator: 'c', denominator: 'd', min: 0.6, why: 'batch mode close to the broker ceiling' },
    ...BOTH,
  ],
  kafka: [
    {
      numerator: 'b',
      denominator: 'e',
      min: 0.8,
      why: 'runner and broker add little over the database',
    },
    {
      numerator: 'c',
      denominator: 'a',
      min: 3,
      why: 'batch mode three times the at-least-once worker',
    },
    { numerator: 'c', denominator: 'd', min: 0.5, why: 'batch mode close to the broker ceiling' },
    ...BOTH,
  ],
  // No figures measured yet (the column is new): only the targets every broker shares.
  rabbitmq: BOTH,
};

/**
 * How far the numerator could go at most, from the ceilings measured in the same run:
 * `cap` is a hard limit (the broker's or the database's own rate: the scenario does
 * both, so it cannot beat either); `oneProcess` assumes the broker client and the
 * database client share one event loop with no overlap (1 / (1/broker + 1/db)), which
 * is what the profiles show when both ceilings run at an event-loop utilisation near 1.
 */
export interface Ceiling {
  /** The ceilings used, e.g. `(d), (g)`. */
  from: string;
  capRatio: number;
  oneProcessRatio: number;
}

export interface TargetResult extends Target {
  ratio: number | null;
  met: boolean | null;
  ceiling: Ceiling | null;
}

/** Per-message (b) does what (e) does plus consuming; batch mode (c) what (g) does plus consuming. */
const DB_CEILING: Partial<Record<ScenarioId, ScenarioId>> = { b: 'e', c: 'g' };

function ceilingOf(t: Target, throughput: (id: ScenarioId) => number | null): Ceiling | null {
  const dbId = DB_CEILING[t.numerator];
  if (dbId === undefined) return null;
  const broker = throughput('d');
  const db = throughput(dbId);
  const base = throughput(t.denominator);
  if (broker === null || db === null || base === null || base <= 0) return null;
  return {
    from: `(d), (${dbId})`,
    capRatio: Math.min(broker, db) / base,
    oneProcessRatio: 1 / (1 / broker + 1 / db) / base,
  };
}

/**
 * `ratio(numerator, denominator)`: the paired per-round ratio (see `pairedRatio`);
 * `throughput(id)`: the median msg/s of a scenario, for the ceilings.
 */
export function evaluateTargets(
  broker: BrokerName,
  ratio: (numerator: ScenarioId, denominator: ScenarioId) => number | null,
  throughput: (id: ScenarioId) => number | null,
): TargetResult[] {
  return TARGETS[broker].map((t) => {
    const r = ratio(t.numerator, t.denominator);
    return {
      ...t,
      ratio: r,
      met: r === null ? null : r >= t.min,
      ceiling: ceilingOf(t, throughput),
    };
  });
}

/** Whether a target is out of reach on this machine, by the run's own ceilings. */
export function wallOf(t: TargetResult): string {
  const c = t.ceiling;
  if (c === null || c === undefined) return '';
  const bound = `ceiling from ${c.from}: ≤ ${c.capRatio.toFixed(2)}× hard, ≈ ${c.oneProcessRatio.toFixed(2)}× in one process`;
  if (t.min > c.capRatio) return `out of reach here (${bound})`;
  if (t.min > c.oneProcessRatio) return `beyond the one-process estimate (${bound})`;
  return bound;
}
