import { BrokerError } from '../../src/errors.js';
import type { Logger } from '../../src/types.js';
import type { KafkaConsumerLike, KafkaTopicPartitionOffset } from './client.js';
import type { OffsetTracker } from './offset-tracker.js';

/** What the committer needs of a partition worker. */
export interface CommitSource {
  readonly topic: string;
  readonly partition: number;
  /** A revoked partition is never committed again. */
  readonly revoked: boolean;
  readonly tracker: OffsetTracker;
}

/** After a failed commit, try again after at least this long. */
const RETRY_AFTER_FAILURE_MS = 1000;

/** Kafka errors that only say the group moved on: the next owner re-reads from the last commit. */
const GENERATION_ERRORS = new Set([
  'REBALANCE_IN_PROGRESS',
  'ILLEGAL_GENERATION',
  'UNKNOWN_MEMBER_ID',
  'FENCED_INSTANCE_ID',
  'NOT_COORDINATOR_FOR_GROUP',
  'NOT_COORDINATOR',
  'COORDINATOR_NOT_AVAILABLE',
]);

/** Whether `error` (or one of its causes) says the commit's group generation is no longer current. */
export function isGenerationError(error: unknown): boolean {
  for (
    let e: unknown = error, depth = 0;
    e !== null && typeof e === 'object' && depth < 8;
    depth++
  ) {
    const type = (e as { type?: unknown }).type;
    if (typeof type === 'string' && GENERATION_ERRORS.has(type)) return true;
    e = (e as { cause?: unknown }).cause;
  }
  return false;
}

/**
 * Commits each current partition's contiguous finished offset, one commit request in
 * flight at a time (two in flight could land out of order and move an offset back).
 *
 * Fencing: the commit list is built from the workers of the current assignment and
 * handed to `commitOffsets` in the same synchronous step, and kafkajs captures the
 * group generation when the call starts; a revoked worker is removed from the list of
 * current workers before the new generation can be used, so no revoked partition is
 * ever committed under a newer generation. A commit refused because the generation
 * ended is expected during a rebalance and only logged.
 */
export class OffsetCommitter {
  private timer: NodeJS.Timeout | undefined;
  private inFlight: Promise<void> | undefined;
  private again = false;
  private closed = false;
  private suspended = false;

  constructor(
    private readonly consumer: Pick<KafkaConsumerLike, 'commitOffsets'>,
    private readonly intervalMs: number,
    private readonly workers: () => Iterable<CommitSource>,
    private readonly reportError: (error: BrokerError) => void,
    private readonly logger: Logger,
  ) {}

  /** Progress was made: commit within `commitIntervalMs` (or right away when it is 0). */
  schedule(delayMs = this.intervalMs): void {
    if (this.closed || this.timer !== undefined) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.flush();
    }, delayMs);
    this.timer.unref?.();
  }

  /** Commits every advanced offset now; resolves when that commit (and any queued one) ended. Never rejects. */
  flush(): Promise<void> {
    if (this.inFlight !== undefined) {
      this.again = true;
      return this.inFlight;
    }
    this.inFlight = this.loop().finally(() => (this.inFlight = undefined));
    return this.inFlight;
  }

  /**
   * A rebalance started: send no new commit request until {@link resume} (the new
   * assignment). Requests already sent carry the old generation, which the broker
   * accepts only while that generation lasts.
   */
  suspend(): void {
    this.suspended = true;
  }

  /** The new assignment is in place: commits may go out again. */
  resume(): void {
    this.suspended = false;
  }

  /** Stops scheduled commits (a last `flush()` is the caller's choice). */
  close(): void {
    this.closed = true;
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
  }

  private async loop(): Promise<void> {
    do {
      this.again = false;
      if (this.suspended) return;
      const offsets: KafkaTopicPartitionOffset[] = [];
      const advanced: Array<[CommitSource, bigint]> = [];
      for (const worker of this.workers()) {
        if (worker.revoked) continue;
        const next = worker.tracker.uncommitted();
        if (next === undefined) continue;
        offsets.push({ topic: worker.topic, partition: worker.partition, offset: next.toString() });
        advanced.push([worker, next]);
      }
      if (offsets.length === 0) continue;
      try {
        await this.consumer.commitOffsets(offsets);
        for (const [worker, next] of advanced) worker.tracker.markCommitted(next);
        this.logger.debug({ offsets }, 'effectively-once: kafka offsets committed');
      } catch (cause) {
        if (isGenerationError(cause)) {
          this.logger.debug(
            { offsets, err: cause },
            'effectively-once: kafka commit refused, the group is rebalancing',
          );
        } else {
          this.reportError(new BrokerError('commit offsets', cause, { details: { offsets } }));
        }
        // Whatever stays current is committed by a later attempt (revoked partitions drop out).
        this.schedule(Math.max(this.intervalMs, RETRY_AFTER_FAILURE_MS));
        return;
      }
    } while (this.again);
  }
}
