import type { OpenedLayer } from '../../kit/data-layers/index.js';
import type { ChaosTables } from './db.js';
import type { FaultTx } from './fault-effects.js';

/** One applied item, as the ledger records it (`part` / `offset`: the Kafka record's, else null). */
export interface LedgerItem {
  key: string;
  attempt: number;
  part: number | null;
  offset: string | null;
}

/**
 * The worker's effect written through a data layer (`--data-layer`): the same counter
 * upsert and ledger rows as the pg handler's, each one statement through the layer's
 * own raw call on its transaction object. The items travel as one JSON parameter (not
 * pg arrays: Knex expands an array binding into a list, and each layer binds arrays
 * its own way), so every layer binds the same text.
 */
export async function applyThroughLayer(
  data: OpenedLayer,
  tx: unknown,
  t: ChaosTables,
  worker: number,
  items: readonly LedgerItem[],
): Promise<void> {
  const json = JSON.stringify(
    items.map((i) => ({ k: i.key, a: i.attempt, p: i.part, o: i.offset })),
  );
  // A key twice in one statement would fail ("cannot affect row a second time"): a dedup bug would show.
  await data.exec(
    tx,
    `INSERT INTO ${t.counters} (key, n) SELECT r.k, 1 FROM jsonb_to_recordset($1::jsonb) AS r(k text)
     ON CONFLICT (key) DO UPDATE SET n = ${t.counters}.n + 1`,
    [json],
  );
  await data.exec(
    tx,
    `INSERT INTO ${t.ledger} (key, worker, pid, attempt, part, kafka_offset)
     SELECT r.k, $2::int, $3::int, r.a, r.p, r.o FROM jsonb_to_recordset($1::jsonb) AS r(k text, a int, p int, o bigint)`,
    [json, worker, process.pid],
  );
}

/**
 * A handler fault's statements through the layer's own raw call on `tx`, and the
 * SQLSTATE of what it throws read with the bridge's `serverError` (what a user of the
 * layer reads from the layer's error).
 */
export function layerFaultTx(data: OpenedLayer, tx: unknown): FaultTx {
  return {
    query: async (text, values) => ({ rows: await data.query(tx, text, values) }),
    run: (text, values) => data.exec(tx, text, values),
    codeOf: (error) => {
      const code = (data.layer.serverError(error) as { code?: unknown } | null)?.code;
      return typeof code === 'string' ? code : undefined;
    },
  };
}
