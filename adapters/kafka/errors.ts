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
 * With `offsets: 'postgres'`, the stored next offset of a partition is above the
 * partition's log end: the topic was most likely deleted and recreated, and its new
 * records reuse offsets the table says were applied. Skipping them would lose them, so
 * the partition is paused instead: check the topic, then delete (or correct) the
 * partition's row in the offsets table and restart the consumer.
 */
export class StoredOffsetAheadError extends EffectivelyOnceError {
  constructor(
    groupId: string,
    topic: string,
    partition: number,
    storedOffset: bigint,
    highWatermark: bigint,
  ) {
    super(
      'EO_KAFKA_OFFSET_AHEAD',
      `Stored offset ${storedOffset} of ${topic}/${partition} (group "${groupId}") is beyond the log end ${highWatermark}: was the topic recreated? The partition is paused`,
      {
        retryable: false,
        details: {
          groupId,
          topic,
          partition,
          storedOffset: storedOffset.toString(),
          highWatermark: highWatermark.toString(),
        },
      },
    );
  }
}
