import type { SQSBatchItemFailure } from 'aws-lambda';
import type { DeliveryOutcome } from '../../src/types.js';

/** One record's end, as the batch answer needs it. */
export interface RecordEnd {
  readonly messageId: string;
  /** The FIFO message group; undefined on a standard queue. */
  readonly group: string | undefined;
  /** Committed, or committed before (a duplicate): the one end that may be deleted. */
  readonly finished: boolean;
  readonly outcome: DeliveryOutcome;
}

/**
 * The `batchItemFailures` of a partial batch response: every record not finished. On a
 * FIFO queue, as AWS documents, a group stops at its first failure: that record and
 * every later one of its group are answered failed (the consumer's ordering already held
 * the later ones back unstarted; one that ran anyway, after a record left to the queue's
 * redrive policy, comes back as a duplicate), so the group comes back in order.
 */
export function batchItemFailures(ends: ReadonlyArray<RecordEnd>): SQSBatchItemFailure[] {
  const stopped = new Set<string>();
  const failures: SQSBatchItemFailure[] = [];
  for (const end of ends) {
    const groupStopped = end.group !== undefined && stopped.has(end.group);
    if (end.finished && !groupStopped) continue;
    failures.push({ itemIdentifier: end.messageId });
    if (end.group !== undefined) stopped.add(end.group);
  }
  return failures;
}
