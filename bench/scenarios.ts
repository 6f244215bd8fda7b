/** The scenarios every bench run interleaves; a–f are issue 7's, g is e in batches (c's database ceiling). */
export const SCENARIO_IDS = ['a', 'b', 'c', 'd', 'e', 'f', 'g'] as const;
export type ScenarioId = (typeof SCENARIO_IDS)[number];

/** What a scenario's effect count must be after draining N messages. */
export type Expectation = 'exactly-once' | 'at-least-once' | 'no-effect';

export interface ScenarioInfo {
  id: ScenarioId;
  label: string;
  expect: Expectation;
  /** Whether the scenario reads from the broker (e does not). */
  usesBroker: boolean;
}

export const SCENARIOS: Record<ScenarioId, ScenarioInfo> = {
  a: {
    id: 'a',
    label: 'at-least-once baseline (autocommit INSERT)',
    expect: 'at-least-once',
    usesBroker: true,
  },
  b: {
    id: 'b',
    label: 'effectively-once, per-message tx',
    expect: 'exactly-once',
    usesBroker: true,
  },
  c: { id: 'c', label: 'effectively-once, batch mode', expect: 'exactly-once', usesBroker: true },
  d: { id: 'd', label: 'broker ceiling (no DB)', expect: 'no-effect', usesBroker: true },
  e: {
    id: 'e',
    label: 'database ceiling (claim + effect tx, no broker)',
    expect: 'exactly-once',
    usesBroker: false,
  },
  f: {
    id: 'f',
    label: 'inbox pattern (inbox + SKIP LOCKED worker)',
    expect: 'exactly-once',
    usesBroker: true,
  },
  g: {
    id: 'g',
    label: 'database ceiling, batches (batch claim + effect tx, no broker)',
    expect: 'exactly-once',
    usesBroker: false,
  },
};
