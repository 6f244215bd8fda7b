/**
 * effectively-once/outbox: effects that leave the database. `enqueue` records a
 * message in the effect's own transaction; a relay publishes committed rows to SQS,
 * Kafka or HTTP with the row's id as the downstream idempotency key, so a relay that
 * publishes twice still has the receiver apply it once.
 * @packageDocumentation
 * @module effectively-once/outbox
 */
export { enqueue, CONTENT_TYPES } from './enqueue.js';
export type { EnqueueOptions, OutboxMessage, Queryable } from './enqueue.js';
export { createRelay } from './relay.js';
export type { RelayOptions } from './relay-options.js';
export type { Relay, RelayStats } from './relay-types.js';
export type { RelayPublishScope, RelayTelemetry } from './telemetry.js';
export type { RelayEventName, RelayEvents } from './events.js';
export { OUTBOX_ID_HEADER } from './record.js';
export type { OutboxRecord, Publisher } from './record.js';
export { listParked, requeueParked } from './parked.js';
export type { ListParkedOptions, ParkedRow, RequeueOptions } from './parked.js';
export { outboxStats } from './stats.js';
export type { DestinationStats, OutboxStats, OutboxStatsOptions } from './stats.js';
export { DEFAULT_OUTBOX_TABLE, migrateOutbox, pruneOutbox } from './table.js';
export type { OutboxTableOptions, PruneOutboxOptions } from './table.js';
export { uuidv7, uuidv7Time } from './uuid.js';
export { httpPublisher } from './publishers/http.js';
export type { HttpPublisherOptions } from './publishers/http.js';
export { ListenThroughPoolerError, OutboxMessageError, PublishError } from './errors.js';
export {
  ConfigurationError,
  DatabaseError,
  EffectivelyOnceError,
  ReplicaUnconfirmedError,
  ReplicaUnseenError,
  StateError,
} from '../errors.js';
export type { ReplicaSafeOptions } from '../replica/options.js';
export type { ReplicaReport, ReplicaState, ReplicaStatus } from '../replica/poller.js';
