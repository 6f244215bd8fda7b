import type { BrokerName } from './args.js';
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
};

export interface TargetResult extends Target {
  ratio: number | null;
  met: boolean | null;
}

/** `ratio(numerator, denominator)`: the paired per-round ratio (see `pairedRatio`). */
export function evaluateTargets(
  broker: BrokerName,
  ratio: (numerator: ScenarioId, denominator: ScenarioId) => number | null,
): TargetResult[] {
  return TARGETS[broker].map((t) => {
    const r = ratio(t.numerator, t.denominator);
    return { ...t, ratio: r, met: r === null ? null : r >= t.min };
  });
}
