import { createHash } from 'node:crypto';
import {
  SendMessageBatchCommand,
  type SendMessageBatchRequestEntry,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import { ConfigurationError } from '../../src/errors.js';
import { CONTENT_TYPES } from '../../src/outbox/enqueue.js';
import { PublishError } from '../../src/outbox/errors.js';
import { OUTBOX_ID_HEADER, type OutboxRecord, type Publisher } from '../../src/outbox/record.js';
import { SQS_LIMITS } from './limits.js';
import { isFifoQueueUrl } from './options.js';

/** Options of {@link sqsPublisher}. */
export interface SqsPublisherOptions {
  /** The SQS client (its region, endpoint and credentials). */
  client: SQSClient;
  /** The queue every row of this destination goes to. */
  queueUrl: string;
  /** Whether the queue is FIFO. Default: whether `queueUrl` ends in `.fifo`. */
  fifo?: boolean;
}

// Two attributes of every message are the publisher's own: the outbox id and, for a
// bytes payload, its transfer encoding.
const MAX_HEADERS = SQS_LIMITS.maxMessageAttributes - 2;
// A FIFO MessageGroupId: 1 to 128 printable ASCII characters (letters, digits, punctuation).
const GROUP_ID = /^[\x21-\x7e]{1,128}$/;

/**
 * The FIFO `MessageGroupId` of an ordering key: the key itself when SQS takes it, else
 * `eo-sha256-` and its SHA-256 in hex. One key always maps to one group, so its order
 * holds; an ordering key may be up to 1000 characters of any text, a group id not.
 */
export function messageGroupId(orderingKey: string): string {
  if (GROUP_ID.test(orderingKey)) return orderingKey;
  return `eo-sha256-${createHash('sha256').update(orderingKey).digest('hex')}`;
}

/**
 * Publishes to one SQS queue with SendMessageBatch, ten at a time. Every message
 * carries the outbox id in the String attribute `eo-outbox-id` (the default dedup key
 * of this library's `sqsSource`), plus the row's headers as String attributes (at most
 * eight). On a FIFO queue the outbox id is also the `MessageDeduplicationId` and the
 * ordering key the `MessageGroupId` (a row without one is its own group; a key SQS
 * refuses as a group id, longer than 128 characters or other than printable ASCII, is
 * sent as `eo-sha256-<hex of its SHA-256>`, one group per key). Bodies are
 * the payload's text; a bytes payload is sent base64 with attribute
 * `eo-content-transfer-encoding: base64`.
 *
 * A failed entry fails only its row; one SQS blames on the sender (a bad attribute, a
 * body too large) is parked at once.
 */
export function sqsPublisher(options: SqsPublisherOptions): Publisher {
  if (options.client === undefined || options.client === null)
    throw new ConfigurationError('client', 'an SQSClient is required');
  if (typeof options.queueUrl !== 'string' || options.queueUrl === '')
    throw new ConfigurationError('queueUrl', 'must be the queue URL');
  const fifo = options.fifo ?? isFifoQueueUrl(options.queueUrl);
  const destination = options.queueUrl;

  return {
    async publish(records, signal) {
      const failures = new Map<string, unknown>();
      const entries: {
        record: OutboxRecord;
        entry: SendMessageBatchRequestEntry;
        bytes: number;
      }[] = [];
      for (const record of records) {
        try {
          entries.push(toEntry(record, entries.length, fifo, destination));
        } catch (error) {
          failures.set(record.id, error);
        }
      }
      for (const chunk of chunks(entries)) {
        const byId = new Map(chunk.map((c) => [c.entry.Id!, c.record]));
        try {
          const result = await options.client.send(
            new SendMessageBatchCommand({
              QueueUrl: options.queueUrl,
              Entries: chunk.map((c) => c.entry),
            }),
            { abortSignal: signal },
          );
          for (const failed of result.Failed ?? []) {
            const record = byId.get(failed.Id ?? '');
            if (record === undefined) continue;
            failures.set(
              record.id,
              new PublishError(destination, `${failed.Code ?? 'error'}: ${failed.Message ?? ''}`, {
                retryable: failed.SenderFault !== true,
                details: { id: record.id, code: failed.Code },
              }),
            );
          }
        } catch (cause) {
          const error = new PublishError(destination, 'SendMessageBatch failed', { cause });
          for (const c of chunk) failures.set(c.record.id, error);
        }
      }
      return failures;
    },
  };
}

function toEntry(
  record: OutboxRecord,
  index: number,
  fifo: boolean,
  destination: string,
): { record: OutboxRecord; entry: SendMessageBatchRequestEntry; bytes: number } {
  const headers = Object.entries(record.headers);
  if (headers.length > MAX_HEADERS)
    throw new PublishError(destination, `SQS carries at most ${MAX_HEADERS} headers`, {
      retryable: false,
    });
  const binary = record.contentType === CONTENT_TYPES.bytes;
  const body = binary ? record.payload.toString('base64') : record.payload.toString('utf8');
  const attributes: NonNullable<SendMessageBatchRequestEntry['MessageAttributes']> = {};
  for (const [name, value] of headers)
    attributes[name] = { DataType: 'String', StringValue: value };
  attributes[OUTBOX_ID_HEADER] = { DataType: 'String', StringValue: record.id };
  if (binary)
    attributes['eo-content-transfer-encoding'] = { DataType: 'String', StringValue: 'base64' };
  const entry: SendMessageBatchRequestEntry = {
    Id: `m${index}`,
    MessageBody: body,
    MessageAttributes: attributes,
    ...(fifo
      ? {
          MessageDeduplicationId: record.id,
          MessageGroupId:
            record.orderingKey === null ? record.id : messageGroupId(record.orderingKey),
        }
      : {}),
  };
  let bytes = Buffer.byteLength(body);
  for (const [name, value] of Object.entries(attributes))
    bytes += Buffer.byteLength(name) + Buffer.byteLength(value.StringValue ?? '') + 6;
  return { record, entry, bytes };
}

/** Splits entries into batches within SQS's count and size limits, in order. */
function chunks<T extends { bytes: number }>(entries: T[]): T[][] {
  const out: T[][] = [];
  let current: T[] = [];
  let size = 0;
  for (const entry of entries) {
    if (
      current.length > 0 &&
      (current.length === SQS_LIMITS.maxBatchSize || size + entry.bytes > SQS_LIMITS.maxBatchBytes)
    ) {
      out.push(current);
      current = [];
      size = 0;
    }
    current.push(entry);
    size += entry.bytes;
  }
  if (current.length > 0) out.push(current);
  return out;
}
