export { memorySource, MemorySource } from './memory-source.js';
export type { MemoryMessage, MemorySendOptions, MemorySourceOptions } from './memory-source.js';
