import type { Source } from 'effectively-once';
import type { Charge } from './payments.js';

/**
 * Where a worker finds its broker: plain strings, so the same settings reach a worker
 * in another process through its environment (DEMO_BROKER=sqs|kafka plus the
 * broker's own DEMO_* variables).
 */
export type BrokerEnv = Record<string, string>;

/** One batch of charges, each sent as one message or record with its idempotency key. */
export type SendCharges = (charges: Charge[]) => Promise<void>;

/** The broker side of a demo run: set up by main, torn down at the end. */
export interface DemoBroker {
  /** e.g. `in-process SQS emulator (fauxqs)`. */
  readonly description: string;
  /** What workers need to consume (see {@link BrokerEnv}). */
  readonly env: BrokerEnv;
  /** The report's line on the broker-specific fault, given how many handlers were slow. */
  faults(slowHandlers: number): string;
  send: SendCharges;
  /** Messages not yet done with (queue depth, or consumer-group lag), and dead letters. */
  backlog(): Promise<{ pending: number; deadLetters: number }>;
  close(): Promise<void>;
}

/** A worker's source for the broker named in `env`, built in whatever process runs the worker. */
export async function workerSource(
  env: BrokerEnv,
  worker: string,
): Promise<{ source: Source<Charge>; close(): void }> {
  if (env['DEMO_BROKER'] === 'kafka') {
    const { kafkaWorkerSource } = await import('./broker-kafka.js');
    return kafkaWorkerSource(env, worker);
  }
  const { sqsWorkerSource } = await import('./broker-sqs.js');
  return sqsWorkerSource(env);
}
