// The test handlers' effect, without jest: the consumer child process imports it too.

/** Body of the test messages. */
export interface Job {
  id: string;
}

/** One applied effect, as the handlers record it in `effects`. */
export interface Effect {
  id: string;
  worker: string;
  attempt: number;
}

/** The handlers' effect: one row in `effects`, through the claim's transaction. */
export async function recordEffect(
  tx: { query: (sql: string, values: unknown[]) => Promise<unknown> },
  id: string,
  worker: string,
  attempt: number,
): Promise<void> {
  await tx.query('INSERT INTO effects (id, worker, attempt) VALUES ($1, $2, $3)', [
    id,
    worker,
    attempt,
  ]);
}

/** Counts of each id in `effects`. */
export function counts(effects: Effect[]): Map<string, number> {
  const map = new Map<string, number>();
  for (const e of effects) map.set(e.id, (map.get(e.id) ?? 0) + 1);
  return map;
}
