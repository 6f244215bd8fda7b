import {
  ValueType,
  type Attributes,
  type Counter,
  type Gauge,
  type Histogram,
  type Meter,
} from '@opentelemetry/api';
import type { Consumer } from '../consumer/types.js';
import type { TelemetryOutcome } from '../consumer/telemetry.js';
import type { MessagingInfo } from '../types.js';
import { ATTR } from './attributes.js';

/** Names of the instruments, for dashboards and tests. */
export const METRIC = {
  /** Counter: deliveries settled, by `effectively_once.outcome`. */
  deliveries: 'effectively_once.deliveries',
  /** Histogram, seconds: the messaging conventions' duration of processing one delivery (or batch). */
  processDuration: 'messaging.process.duration',
  /** Histogram, seconds: the user's handler (and the adapter's in-transaction hook). */
  handlerDuration: 'effectively_once.handler.duration',
  /** Histogram, seconds: one claim transaction, checkout to COMMIT or rollback. */
  transactionDuration: 'effectively_once.transaction.duration',
  /** Observable up-down counter: deliveries in the consumer now. */
  inFlight: 'effectively_once.in_flight',
  /** Counter: dedup rows deleted by the consumer's `retention` pruner. */
  pruned: 'effectively_once.pruned',
  /** Gauge: records after the one being processed in its partition, when fetched (Kafka). */
  kafkaLag: 'effectively_once.kafka.lag',
  /**
   * Observable gauge, bytes: with `replicaSafe`, how far the watched standby is behind the
   * primary at the last poll, by `effectively_once.replica.state`.
   */
  replicaLag: 'effectively_once.replica.lag',
} as const;

/** Bucket bounds in seconds: from a fast claim (1 ms) to a slow handler (a minute). */
export const SECONDS = [
  0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60,
];

/** The instruments of one `otelTelemetry()`, shared by every consumer it is given to. */
export class Metrics {
  private readonly deliveries: Counter;
  private readonly processDuration: Histogram;
  private readonly handlerDuration: Histogram;
  private readonly transactionDuration: Histogram;
  private readonly pruned: Counter;
  private readonly lag: Gauge;
  private readonly consumers = new Map<Consumer, string>();

  constructor(meter: Meter) {
    this.deliveries = meter.createCounter(METRIC.deliveries, {
      description: 'Deliveries settled, by outcome',
      unit: '{delivery}',
      valueType: ValueType.INT,
    });
    const seconds = (description: string) => ({
      description,
      unit: 's',
      advice: { explicitBucketBoundaries: SECONDS },
    });
    this.processDuration = meter.createHistogram(
      METRIC.processDuration,
      seconds('Duration of processing one delivery or batch, from hand-over to settlement'),
    );
    this.handlerDuration = meter.createHistogram(
      METRIC.handlerDuration,
      seconds('Duration of the handler inside the claim transaction'),
    );
    this.transactionDuration = meter.createHistogram(
      METRIC.transactionDuration,
      seconds('Duration of one claim transaction, connection checkout to COMMIT or rollback'),
    );
    this.pruned = meter.createCounter(METRIC.pruned, {
      description: 'Dedup rows deleted by the retention pruner',
      unit: '{row}',
      valueType: ValueType.INT,
    });
    this.lag = meter.createGauge(METRIC.kafkaLag, {
      description: 'Records after the one being processed in its partition, when it was fetched',
      unit: '{record}',
      valueType: ValueType.INT,
    });
    meter
      .createObservableUpDownCounter(METRIC.inFlight, {
        description:
          'Deliveries in the consumer: claimed, running, or waiting for a slot or an ack',
        unit: '{delivery}',
        valueType: ValueType.INT,
      })
      .addCallback((result) => {
        for (const [consumer, name] of this.consumers)
          result.observe(consumer.stats().inFlight, { [ATTR.consumer]: name });
      });
    meter
      .createObservableGauge(METRIC.replicaLag, {
        description: 'How far the standby replicaSafe waits for is behind the primary',
        unit: 'By',
        valueType: ValueType.INT,
      })
      .addCallback((result) => {
        for (const [consumer, name] of this.consumers) {
          const replica = consumer.stats().replica;
          if (replica?.lagBytes === undefined) continue;
          result.observe(replica.lagBytes, {
            [ATTR.consumer]: name,
            [ATTR.replicaState]: replica.state ?? 'unknown',
          });
        }
      });
  }

  /** Observes a consumer's in-flight count and pruning until it is done. */
  attach(consumer: Consumer, name: string): void {
    this.consumers.set(consumer, name);
    consumer.on('pruned', ({ deleted }) => this.pruned.add(deleted, { [ATTR.consumer]: name }));
    void consumer.done.then(() => this.consumers.delete(consumer));
  }

  settled(outcome: TelemetryOutcome, attributes: Attributes): void {
    this.deliveries.add(1, { ...attributes, [ATTR.outcome]: outcome });
  }

  processed(seconds: number, attributes: Attributes): void {
    this.processDuration.record(seconds, attributes);
  }

  step(step: 'handler' | 'transaction', seconds: number, attributes: Attributes): void {
    (step === 'handler' ? this.handlerDuration : this.transactionDuration).record(
      seconds,
      attributes,
    );
  }

  /** Kafka: the partition's lag as seen by this record's fetch. */
  observeLag(info: MessagingInfo, attributes: Attributes): void {
    if (info.lag === undefined || info.partition === undefined) return;
    this.lag.record(info.lag, { ...attributes, [ATTR.partition]: String(info.partition) });
  }
}
