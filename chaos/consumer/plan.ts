import {
  planHandlerFaults,
  type HandlerFault,
  type HandlerFaultKind,
  type PlannedFault,
} from './handler-faults.js';
import type { Rng } from '../../kit/rng.js';

/** Message body of a logical message, as the worker's handler receives it. */
export interface ChaosBody {
  key: string;
  i: number;
  /** Set on poison bodies: the handler writes its effect, then throws (so it must roll back). */
  poison?: true;
  /** A handler fault to commit (see handler-faults.ts). */
  fault?: HandlerFault;
}

/** One send to the broker. */
export interface Send {
  /** Idempotency key (SQS attribute / Kafka header). */
  key: string;
  /** Raw body: JSON of a {@link ChaosBody}, or text that is not JSON (undecodable poison). */
  body: string;
  /** Random number the Kafka producer turns into a partition (duplicates land anywhere). */
  slot: number;
}

/** Why a key must end in the dead-letter target, and the error codes its dead letter may carry. */
export interface ExpectedDeadLetter {
  reason: string;
  codes: readonly string[];
}

export interface Plan {
  /** Keys of the N logical messages, each to be applied exactly once. */
  keys: string[];
  /** Keys of the poison messages, each to be dead-lettered and never applied. */
  poisonKeys: string[];
  /**
   * Every key that must be dead-lettered and never applied: the poison and the
   * permanent handler faults, each with the codes its dead letter may carry.
   */
  deadLetters: Map<string, ExpectedDeadLetter>;
  /** Planned handler faults (transient and hot ones are on logical keys). */
  faults: PlannedFault[];
  /** Logical keys whose effect also updates the hot rows (serialization pairs). */
  hotKeys: number;
  /** Everything the producer sends, in send order: originals, duplicates, poison. */
  sends: Send[];
  /** Producer-side duplicate sends among `sends` (same key, same body as an original). */
  duplicates: number;
}

/** Handler faults to plan: about `count` faulty keys of these kinds. */
export interface HandlerFaultPlan {
  count: number;
  kinds: readonly HandlerFaultKind[];
}

/** How far apart in the send order the two members of a hot pair are sent. */
const HOT_PAIR_GAP = 20;

/**
 * N logical messages with keys `m-<i>`, `ceil(N × ratio)` duplicate sends of randomly
 * chosen ones (a key may be re-sent several times, before or after its original), and
 * P poison messages: half whose handler throws after writing (rollback must undo it),
 * half whose body is not JSON (never reaches the handler). Handler faults go on
 * distinct logical keys (transient, hot) or keys of their own (permanent). All in a
 * shuffled order, except that a hot pair's second member follows its first closely.
 */
export function makePlan(
  rng: Rng,
  messages: number,
  duplicateRatio: number,
  poison: number,
  handlerFaults: HandlerFaultPlan = { count: 0, kinds: [] },
): Plan {
  const originals: Send[] = [];
  const bodies: ChaosBody[] = [];
  for (let i = 0; i < messages; i++) {
    const key = `m-${i}`;
    bodies.push({ key, i });
    originals.push({ key, body: '', slot: rng.int(0, 1 << 30) });
  }
  // Faulty logical keys are drawn without replacement, from at most half the keys.
  const free = rng.shuffle(originals.map((_, i) => i)).slice(0, Math.floor(messages / 2));
  const faults = planHandlerFaults(rng, handlerFaults.count, handlerFaults.kinds, () => {
    const i = free.pop();
    if (i === undefined) throw new Error('more handler faults than half the messages');
    return `m-${i}`;
  });
  const byKey = new Map(faults.map((f) => [f.key, f]));
  for (const [i, body] of bodies.entries()) {
    const fault = byKey.get(body.key)?.fault;
    if (fault !== undefined) body.fault = fault;
    originals[i]!.body = JSON.stringify(body);
  }
  const duplicates = Math.ceil(messages * duplicateRatio);
  const sends = [...originals];
  for (let d = 0; d < duplicates; d++) {
    const original = rng.pick(originals);
    // A duplicate is the same send again; it may land on another partition.
    sends.push({ ...original, slot: rng.int(0, 1 << 30) });
  }
  const deadLetters = new Map<string, ExpectedDeadLetter>();
  const poisonKeys: string[] = [];
  for (let p = 0; p < poison; p++) {
    const key = `poison-${p}`;
    poisonKeys.push(key);
    const body =
      p % 2 === 0
        ? JSON.stringify({ key, i: -1, poison: true } satisfies ChaosBody)
        : `not json {${key}`;
    deadLetters.set(
      key,
      p % 2 === 0
        ? { reason: 'poison: handler throws', codes: ['EO_HANDLER'] }
        : { reason: 'poison: body is not JSON', codes: ['EO_BODY_PARSE'] },
    );
    sends.push({ key, body, slot: rng.int(0, 1 << 30) });
  }
  for (const f of faults) {
    if (f.expected.end !== 'dead-lettered') continue;
    deadLetters.set(f.key, { reason: f.expected.reason, codes: f.expected.codes });
    const body: ChaosBody = { key: f.key, i: -1, fault: f.fault };
    sends.push({ key: f.key, body: JSON.stringify(body), slot: rng.int(0, 1 << 30) });
  }
  rng.shuffle(sends);
  placeHotPairs(sends, faults);
  return {
    keys: originals.map((o) => o.key),
    poisonKeys,
    deadLetters,
    faults,
    hotKeys: faults.filter((f) => f.fault.kind === 'serialization').length,
    sends,
    duplicates,
  };
}

/**
 * Moves the sends of each hot pair's second member (originals and duplicates alike)
 * that come before the first member's first send, or soon after it, to HOT_PAIR_GAP
 * sends after it, so the first runs of the two members are consumed at about the same
 * time (a copy that ran long before would leave the pair without contention).
 */
function placeHotPairs(sends: Send[], faults: PlannedFault[]): void {
  const firstOfPair = new Map<number, string>();
  for (const f of faults) {
    if (f.fault.kind !== 'serialization') continue;
    const first = firstOfPair.get(f.fault.pair);
    if (first === undefined) {
      firstOfPair.set(f.fault.pair, f.key);
      continue;
    }
    const limit = sends.findIndex((s) => s.key === first) + HOT_PAIR_GAP;
    const moved = sends.filter((s, i) => s.key === f.key && i <= limit);
    if (moved.length === 0) {
      // Every copy comes later: bring the first one forward.
      moved.push(sends.find((s) => s.key === f.key)!);
    }
    for (const send of moved) sends.splice(sends.indexOf(send), 1);
    const at = sends.findIndex((s) => s.key === first) + HOT_PAIR_GAP;
    sends.splice(Math.min(sends.length, at), 0, ...moved);
  }
}
