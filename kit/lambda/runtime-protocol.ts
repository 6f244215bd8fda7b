import type { SQSEvent } from 'aws-lambda';

/** Parent → execution environment. */
export type ToRuntime = { type: 'invoke'; id: number; event: SQSEvent; deadline: number };

/** Execution environment → parent. */
export type FromRuntime =
  | { type: 'ready' }
  | { type: 'answer'; id: number; response: unknown }
  | { type: 'error'; id: number; message: string };
