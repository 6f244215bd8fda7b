import type { Rng } from './rng.js';

/** Message body of a logical message, as the worker's handler receives it. */
export interface ChaosBody {
  key: string;
  i: number;
  /** Set on poison bodies: the handler writes its effect, then throws (so it must roll back). */
  poison?: true;
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

export interface Plan {
  /** Keys of the N logical messages, each to be applied exactly once. */
  keys: string[];
  /** Keys of the poison messages, each to be dead-lettered and never applied. */
  poisonKeys: string[];
  /** Everything the producer sends, in send order: originals, duplicates, poison. */
  sends: Send[];
  /** Producer-side duplicate sends among `sends` (same key, same body as an original). */
  duplicates: number;
}

/**
 * N logical messages with keys `m-<i>`, `ceil(N × ratio)` duplicate sends of randomly
 * chosen ones (a key may be re-sent several times, before or after its original), and
 * P poison messages: half whose handler throws after writing (rollback must undo it),
 * half whose body is not JSON (never reaches the handler). All in a shuffled order.
 */
export function makePlan(rng: Rng, messages: number, duplicateRatio: number, poison: number): Plan {
  const originals: Send[] = [];
  for (let i = 0; i < messages; i++) {
    const key = `m-${i}`;
    const body: ChaosBody = { key, i };
    originals.push({ key, body: JSON.stringify(body), slot: rng.int(0, 1 << 30) });
  }
  const duplicates = Math.ceil(messages * duplicateRatio);
  const sends = [...originals];
  for (let d = 0; d < duplicates; d++) {
    const original = rng.pick(originals);
    // A duplicate is the same send again; it may land on another partition.
    sends.push({ ...original, slot: rng.int(0, 1 << 30) });
  }
  const poisonKeys: string[] = [];
  for (let p = 0; p < poison; p++) {
    const key = `poison-${p}`;
    poisonKeys.push(key);
    const body =
      p % 2 === 0
        ? JSON.stringify({ key, i: -1, poison: true } satisfies ChaosBody)
        : `not json {${key}`;
    sends.push({ key, body, slot: rng.int(0, 1 << 30) });
  }
  rng.shuffle(sends);
  return { keys: originals.map((o) => o.key), poisonKeys, sends, duplicates };
}
