import { EffectivelyOnceError } from '../../src/errors.js';

/**
 * The partition was taken from this member by a rebalance (or the member left the
 * group): its deliveries' `signal` aborts with this, and their outcome is the new
 * owner's to decide.
 */
export class PartitionRevokedError extends EffectivelyOnceError {
  constructor(topic: string, partition: number) {
    super('EO_PARTITION_REVOKED', `Partition ${topic}/${partition} was revoked`, {
      retryable: true,
      details: { topic, partition },
    });
  }
}

/**
 * A record the offsets table remembers (`offsets: 'postgres'`) and what the partition
 * holds at its offset now: another record (another timestamp) means the topic was
 * recreated.
 */
export interface OffsetMarkMismatch {
  /** The remembered record's offset. */
  readonly offset: bigint;
  /** Its timestamp when it was applied (milliseconds). */
  readonly storedTimestamp: bigint;
  /** The timestamp of the record found at that offset now. */
  readonly foundTimestamp: bigint;
}

/**
 * With `offsets: 'postgres'`, the partition no longer holds the records the stored next
 * offset counts as applied: the stored offset is above the partition's log end, or the
 * record remembered below it (`mismatch`) is not the one found at its offset. The topic
 * was most likely deleted and recreated, and its new records reuse offsets the table
 * says were applied. Skipping them would lose them, so the partition is paused instead:
 * check the topic, then delete (or correct) the partition's row in the offsets table and
 * restart the consumer.
 */
export class StoredOffsetAheadError extends EffectivelyOnceError {
  constructor(
    groupId: string,
    topic: string,
    partition: number,
    storedOffset: bigint,
    highWatermark: bigint,
    mismatch?: OffsetMarkMismatch,
  ) {
    super(
      'EO_KAFKA_OFFSET_AHEAD',
      mismatch === undefined
        ? `Stored offset ${storedOffset} of ${topic}/${partition} (group "${groupId}") is beyond the log end ${highWatermark}: was the topic recreated? The partition is paused`
        : `Stored offset ${storedOffset} of ${topic}/${partition} (group "${groupId}") counts offset ${mismatch.offset} as applied, but the record there now has another timestamp (${mismatch.foundTimestamp}, applied ${mismatch.storedTimestamp}): was the topic recreated? The partition is paused`,
      {
        retryable: false,
        details: {
          groupId,
          topic,
          partition,
          storedOffset: storedOffset.toString(),
          highWatermark: highWatermark.toString(),
          ...(mismatch === undefined
            ? {}
            : {
                markOffset: mismatch.offset.toString(),
                storedTimestamp: mismatch.storedTimestamp.toString(),
                foundTimestamp: mismatch.foundTimestamp.toString(),
              }),
        },
      },
    );
  }
}
