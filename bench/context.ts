import type pg from 'pg';
import type { Drain } from './drain.js';
import type { OpenedLayer } from '../kit/data-layers/index.js';

/** What every scenario runner gets. */
export interface RunContext {
  /** Pool of `concurrency` connections, search_path = the bench schema. */
  pool: pg.Pool;
  /** Schema of the dedup table the run claims in (b, c, e, g). */
  dedupSchema: string;
  /** b, c: run the consumer with `retention`, so it prunes while it drains. */
  pruning: boolean;
  messages: number;
  concurrency: number;
  /** `createConsumer` `concurrency` (b, c). */
  consumerConcurrency: number;
  batchSize: number;
  inboxBatch: number;
  drain: Drain;
  /** b with `--data-layer`: the layer the door's `dataLayer` is and the handler writes through. */
  dataLayer?: OpenedLayer;
  /** Diagnostics a scenario wants in the report (averages in ms, counts), e.g. where a delivery's time goes. */
  notes: Record<string, number>;
}
