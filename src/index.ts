export { createConsumer } from './consumer.js';
export type { Consumer, StopOptions } from './consumer.js';
export type { ConsumerOptions } from './options.js';
export { migrate } from './store/migrate.js';
export type { MigrateOptions } from './store/migrate.js';
export { prune } from './store/prune.js';
export type { PruneOptions } from './store/prune.js';
export {
  quoteIdentifier,
  qualifiedTable,
  DEFAULT_SCHEMA,
  DEFAULT_TABLE,
} from './store/identifiers.js';
export type { TableRef } from './store/identifiers.js';
export { validateKey, DEFAULT_MAX_KEY_LENGTH, MAX_KEY_BYTES } from './keys.js';
export { payloadHash } from './hash.js';
export { resolveBackoff } from './backoff.js';
export type { BackoffFn } from './backoff.js';
export type { Listener } from './events.js';
export * from './errors.js';
export type * from './types.js';
