import type { ClaimConnection, WorkResult } from '../tx/claim-connection.js';
import type { Delivery } from '../types.js';

// The steps the per-message runner (runner.ts) and the batch runner (batch-runner.ts)
// share around one claim transaction.

/**
 * Runs the adapters' in-transaction hooks (e.g. Kafka offsets stored in Postgres) on
 * the raw client: they are the library's statements, not the handler's.
 */
export async function runAdapterHook(
  deliveries: ReadonlyArray<Delivery<unknown>>,
  conn: ClaimConnection,
): Promise<WorkResult> {
  try {
    for (const d of deliveries) {
      // No `await` of a missing hook: a microtask per delivery, a hundred per batch.
      if (d.inTransaction !== undefined) await d.inTransaction(conn.client, deliveries);
    }
    return { kind: 'ok' };
  } catch (error) {
    return { kind: 'hook-failed', error };
  }
}

/** What a step's telemetry reports as its failure: the error of a failed or released end. */
export function failureOf(end: { kind: string; error?: unknown }): unknown {
  return end.kind === 'failed' || end.kind === 'released' ? end.error : undefined;
}

/** The failure of the handler step (the handler threw, timed out, or the hook failed). */
export function workFailure(work: WorkResult): unknown {
  switch (work.kind) {
    case 'ok':
      return undefined;
    case 'stopped':
      return new Error('stopped: the consumer is shutting down');
    default:
      return work.error;
  }
}
