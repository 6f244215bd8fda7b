/**
 * Classifies errors thrown by `@aws-sdk/client-sqs`. The JSON protocol reports the
 * exception name (`QueueDoesNotExist`); the older query protocol and some emulators
 * report the legacy code (`AWS.SimpleQueueService.NonExistentQueue`). Both are handled.
 */

const QUEUE_MISSING = new Set(['QueueDoesNotExist', 'AWS.SimpleQueueService.NonExistentQueue']);
const HANDLE_LOST = new Set([
  'ReceiptHandleIsInvalid',
  'MessageNotInflight',
  'AWS.SimpleQueueService.MessageNotInflight',
  'InvalidReceiptHandle',
]);
const ACCESS_DENIED = new Set(['AccessDenied', 'AccessDeniedException', 'InvalidClientTokenId']);

/** The queue URL names no queue: a configuration mistake, not a transient failure. */
export function isQueueMissing(error: unknown): boolean {
  return matches(error, QUEUE_MISSING);
}

/** The receipt handle no longer refers to this receive: the delivery is lost to us. */
export function isReceiptHandleLost(codeOrError: unknown): boolean {
  if (typeof codeOrError === 'string') return HANDLE_LOST.has(codeOrError);
  return matches(codeOrError, HANDLE_LOST);
}

/** The credentials may not perform the call (missing IAM permission). */
export function isAccessDenied(error: unknown): boolean {
  return matches(error, ACCESS_DENIED);
}

/** The SDK call was aborted through its `abortSignal`. */
export function isAbort(error: unknown): boolean {
  return error instanceof Error && error.name === 'AbortError';
}

function matches(error: unknown, names: ReadonlySet<string>): boolean {
  if (typeof error !== 'object' || error === null) return false;
  const { name, Code, code } = error as { name?: unknown; Code?: unknown; code?: unknown };
  return [name, Code, code].some(
    (candidate) => typeof candidate === 'string' && names.has(candidate),
  );
}
