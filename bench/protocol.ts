import type { BrokerName } from '../kit/services/private.js';
import type { EffectSummary } from './db.js';
import type { MemorySeries } from './memory-series.js';
import type { ScenarioId } from './scenarios.js';
import type { LayerName } from '../kit/data-layers/index.js';

/** What the parent asks one child process to measure. */
export interface ScenarioTask {
  broker: BrokerName;
  scenario: ScenarioId;
  round: number;
  messages: number;
  concurrency: number;
  consumerConcurrency: number;
  batchSize: number;
  inboxBatch: number;
  partitions: number;
  keyConcurrency: number;
  /** The client under kafkaSource in b and c (absent: kafkajs). */
  kafkaClient?: 'kafkajs' | 'platformatic';
  /** Rows of history in the run's `processed_messages` (0: an empty table). */
  dedupPreload: number;
  /** Schema of the run's `processed_messages`: the bench schema (emptied per run) or the history's. */
  dedupSchema: string;
  /** b, c: the consumer prunes its dedup window (`retention`) while it drains. */
  pruning: boolean;
  /** Sample RSS and heap through the drain (`--memory-run`). */
  memoryRun: boolean;
  /** b: the handler writes through this data layer (`--data-layer`); absent: raw pg. */
  dataLayer?: LayerName;
  endpoints: {
    databaseUrl: string;
    sqsEndpoint?: string | undefined;
    kafkaBrokers?: string | undefined;
    rabbitmqUrl?: string | undefined;
  };
}

/** One scenario run's figures and checks. */
export interface RunResult {
  scenario: ScenarioId;
  round: number;
  dedupPreload: number;
  /** The consumer pruned while it drained (absent in reports from before the flag). */
  pruning?: boolean;
  /** The data layer b's handler wrote through (`--data-layer`); absent: raw pg. */
  dataLayer?: LayerName;
  messages: number;
  /** First message seen by the scenario's code → last one done (committed and acked). */
  drainMs: number;
  throughput: number;
  /** End to end, send → effect committed (d: send → delete confirmed), ms. */
  p50Ms: number | null;
  p99Ms: number | null;
  peakRssMb: number;
  startRssMb: number;
  /** Ids done more than once (at-least-once redeliveries). */
  repeats: number;
  effects: EffectSummary;
  /** Messages left on the broker after the drain; 0 expected. */
  remaining: number | null;
  /** Scenario diagnostics (see RunContext.notes). */
  notes: Record<string, number>;
  /** Failed checks; empty when the run is sound. */
  problems: string[];
  /** RSS and heap through the drain, with `--memory-run`. */
  memory?: MemorySeries;
}

export type ChildReply = { ok: true; result: RunResult } | { ok: false; error: string };
