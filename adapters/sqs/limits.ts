/**
 * SQS's own limits, in one place: the source's options are validated against them, and
 * the delete batcher, the dead-letter path and the outbox publisher size their requests
 * by them.
 */
export const SQS_LIMITS = {
  /** `MaxNumberOfMessages` of one ReceiveMessage and entries of one batch request. */
  maxBatchSize: 10,
  /** Bytes of one batch request: the sum of its bodies and attributes (256 KiB). */
  maxBatchBytes: 256 * 1024,
  /** Longest long poll, in seconds. */
  maxWaitTimeSeconds: 20,
  /** Longest visibility timeout, in seconds (12 h), counted from the receive. */
  maxVisibilityTimeoutSeconds: 43_200,
  /** Message attributes allowed on one message. */
  maxMessageAttributes: 10,
} as const;
