import type { EffectivelyOnceError } from '../../src/errors.js';
import type { KeyResult } from '../../src/keys.js';
import type { Delivery, MessagingInfo } from '../../src/types.js';
import type { KafkaHeaders } from './client.js';
import type { Decoded } from './decode.js';
import { recordSentAt, recordSentBy, type KafkaRecord } from './record.js';

/** How one delivery of a record ended, as far as the partition is concerned. */
export type Settlement =
  | { kind: 'finished' }
  /** `attemptSpent`: the failure was the record's (a handler failure), not the database's. */
  | { kind: 'retry'; delayMs: number; attemptSpent: boolean }
  | { kind: 'released' };

export const FINISHED: Settlement = { kind: 'finished' };
export const RELEASED: Settlement = { kind: 'released' };

/** A fetched record waiting in (or taken from) its partition worker's queue. */
export interface QueuedRecord<T> {
  readonly record: KafkaRecord;
  readonly offset: bigint;
  readonly orderingKey: string;
  /** Set once, at the first delivery: the dedup key, or why there is none. */
  key?: KeyResult;
  decoded?: Decoded<T>;
  attempt: number;
}

/** What a record's delivery needs from its partition worker. */
export interface RecordOwner {
  /** Whether the partition was taken away. */
  readonly revoked: boolean;
  /** Nothing after this record of its ordering key may start until it is done. */
  hold(item: QueuedRecord<unknown>): void;
  publishDeadLetter(
    record: KafkaRecord,
    reason: EffectivelyOnceError,
    attempt: number,
  ): Promise<void>;
  readonly redeliveryDelayMs: number;
  /** The consumer group, for telemetry. */
  readonly groupId: string;
  /** The partition's high watermark of the last fetched batch, when kafkajs gave one. */
  readonly highWatermark: bigint | undefined;
}

/**
 * One attempt at one record, as the runner sees it. A class rather than an object
 * literal of closures: one allocation per record matters at tens of thousands of
 * records a second. `settlement` is how the attempt ended (the first answer wins).
 */
export class RecordDelivery<T> implements Delivery<T> {
  settlement: Settlement | undefined;
  readonly key: string | undefined;
  readonly body: T;
  readonly payload: Uint8Array | undefined;
  readonly attempt: number;
  readonly orderingKey: string;
  readonly rejection: EffectivelyOnceError | undefined;
  /** Set with `offsets: 'postgres'`. */
  inTransaction?: Delivery<T>['inTransaction'];

  constructor(
    /** The partition worker that handed the record over. */
    readonly owner: RecordOwner,
    private readonly item: QueuedRecord<T>,
    decoded: Decoded<T>,
    readonly signal: AbortSignal,
  ) {
    this.key = item.key?.key;
    this.body = decoded.body as T;
    this.payload = item.record.value ?? undefined;
    this.attempt = item.attempt;
    this.orderingKey = item.orderingKey;
    this.rejection = decoded.rejection ?? item.key?.rejection;
  }

  get raw(): KafkaRecord {
    return this.item.record;
  }

  /** The record's timestamp, for the admission floor; read only when the floor is on. */
  get firstSentAt(): Date | undefined {
    return recordSentAt(this.item.record);
  }

  /** `broker` for a `LogAppendTime` record (kafkajs tells), else `producer`. */
  get firstSentBy(): 'broker' | 'producer' {
    return recordSentBy(this.item.record);
  }

  /** The record's offset. */
  get offset(): bigint {
    return this.item.offset;
  }

  /** Describes the record for telemetry: topic, partition, offset, group, headers. */
  messaging(): MessagingInfo {
    const { record } = this.item;
    const end = this.owner.highWatermark;
    return {
      system: 'kafka',
      destination: record.topic,
      consumerGroup: this.owner.groupId,
      partition: record.partition,
      offset: record.offset,
      lag: end === undefined ? undefined : Math.max(0, Number(end - this.item.offset - 1n)),
      carrier: headerText(record.headers),
    };
  }

  ack(): Promise<void> {
    this.settle(FINISHED);
    return Promise.resolve();
  }

  retry(delayMs: number, _reason?: EffectivelyOnceError, attemptSpent = true): Promise<void> {
    this.owner.hold(this.item);
    this.settle({ kind: 'retry', delayMs, attemptSpent });
    return Promise.resolve();
  }

  release(): Promise<void> {
    this.settle(RELEASED);
    return Promise.resolve();
  }

  async deadLetter(reason: EffectivelyOnceError): Promise<void> {
    // A revoked record is the next owner's to judge (a revocation aborts handlers, which
    // can look like a last failed attempt): no dead letter for it from here.
    if (this.owner.revoked) return this.settle(RELEASED);
    try {
      await this.owner.publishDeadLetter(this.item.record, reason, this.item.attempt);
    } catch (error) {
      this.owner.hold(this.item);
      // The attempt that led here failed for good; publishing its dead letter failed after.
      this.settle({ kind: 'retry', delayMs: this.owner.redeliveryDelayMs, attemptSpent: true });
      throw error;
    }
    this.settle(FINISHED);
  }

  private settle(settlement: Settlement): void {
    this.settlement ??= settlement;
  }
}

/** Kafka headers as text (the first value of a repeated header), for trace context lookup. */
export function headerText(headers: KafkaHeaders): Record<string, string> {
  const carrier: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    const first: unknown = Array.isArray(value) ? (value as unknown[])[0] : value;
    if (typeof first === 'string') carrier[name] = first;
    else if (Buffer.isBuffer(first)) carrier[name] = first.toString('utf8');
  }
  return carrier;
}
