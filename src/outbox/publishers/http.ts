import { idempotentFetch } from '../../client/idempotent-fetch.js';
import type { IdempotentFetchOptions } from '../../client/options.js';
import { ConfigurationError } from '../../errors.js';
import { PublishError } from '../errors.js';
import type { OutboxRecord, Publisher } from '../record.js';

/** Options of {@link httpPublisher}. */
export interface HttpPublisherOptions {
  /** Where each row is sent: a URL, or a function of the row. */
  url: string | URL | ((record: OutboxRecord) => string | URL);
  /** The method. Default `POST`. */
  method?: string;
  /** Headers added to every request (authorisation, say), under the row's own. */
  headers?: Record<string, string>;
  /**
   * idempotentFetch's retry settings for one publish (`attempts`, `deadlineMs`,
   * `attemptTimeoutMs`, `backoff`). Default: 3 attempts within the relay's publish
   * timeout. The key is always the outbox id.
   */
  fetch?: Pick<
    IdempotentFetchOptions,
    'attempts' | 'deadlineMs' | 'attemptTimeoutMs' | 'backoff' | 'header'
  >;
}

/**
 * Sends each row as one HTTP request through `idempotentFetch`, with the outbox id as
 * its `Idempotency-Key`, the payload as the body and its content type, and the row's
 * headers. A server that keeps keys (effectively-once/http, Stripe…) applies a row once
 * however often the relay sends it. 2xx publishes the row; a 4xx other than 408, 409
 * and 429 parks it at once (the request itself is wrong); anything else is retried.
 * Rows of one batch are sent concurrently (never two of one ordering key).
 */
export function httpPublisher(options: HttpPublisherOptions): Publisher {
  if (
    typeof options.url !== 'string' &&
    !(options.url instanceof URL) &&
    typeof options.url !== 'function'
  )
    throw new ConfigurationError('url', 'must be a URL or a function of the row');
  const method = options.method ?? 'POST';
  const urlOf = (record: OutboxRecord): string | URL =>
    typeof options.url === 'function' ? options.url(record) : options.url;

  async function send(record: OutboxRecord, signal: AbortSignal): Promise<void> {
    const url = urlOf(record);
    const { response } = await idempotentFetch(
      url,
      {
        method,
        headers: { ...options.headers, ...record.headers, 'content-type': record.contentType },
        body: record.payload,
        signal,
      },
      { attempts: 3, ...options.fetch, key: record.id },
    );
    // The body is unread: drain it so the connection goes back to the pool.
    await response.body?.cancel().catch(() => undefined);
    if (response.ok) return;
    const permanent =
      response.status >= 400 && response.status < 500 && ![408, 409, 429].includes(response.status);
    throw new PublishError(String(url), `HTTP ${response.status}`, {
      retryable: !permanent,
      details: { status: response.status, id: record.id },
    });
  }

  return {
    async publish(records, signal) {
      const failures = new Map<string, unknown>();
      await Promise.all(
        records.map((record) =>
          send(record, signal).catch((error: unknown) => {
            failures.set(record.id, error);
          }),
        ),
      );
      return failures;
    },
  };
}
