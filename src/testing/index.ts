/**
 * `effectively-once/testing`: an in-memory at-least-once source for testing handlers
 * against a real Postgres without a broker.
 * @packageDocumentation
 * @module effectively-once/testing
 */
export { memorySource, MemorySource } from './memory-source.js';
export type { MemoryMessage, MemorySendOptions, MemorySourceOptions } from './memory-source.js';
