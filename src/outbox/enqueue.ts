import { createHash } from 'node:crypto';
import type { TableRef } from '../store/identifiers.js';
import { OutboxMessageError } from './errors.js';
import { outboxRef, outboxRelations, type OutboxTableOptions } from './table.js';
import { uuidv7 } from './uuid.js';

/**
 * Anything that runs a parameterised query: a consumer handler's `ctx.tx`, an HTTP
 * handler's `ctx.tx` (a pg client), a `pg` PoolClient inside your own BEGIN … COMMIT,
 * or a data layer's transaction through its bridge, `layer.sql(ctx.tx)` (a `SqlRunner`,
 * see DataLayer). {@link enqueue} sends one statement per call, `$1…` placeholders
 * bound to strings, numbers, a Buffer and null, so any of these runs it.
 */
export interface Queryable {
  /** Runs `text` with `$1…` bound to `values`. */
  query(text: string, values?: unknown[]): Promise<unknown>;
}

/** A message to publish once the enqueuing transaction commits. */
export interface OutboxMessage {
  /**
   * Which publisher sends it: a key of the relay's `publishers` (`'orders-queue'`,
   * `'payments-api'`). 1 to 200 characters.
   */
  destination: string;
  /**
   * What is sent. A `Uint8Array` is sent as bytes, a string as UTF-8 text, anything
   * else as JSON (`JSON.stringify`, checked here: a BigInt or a cycle throws).
   */
  payload: unknown;
  /**
   * Rows of one destination with the same key are published one at a time, in the order
   * their transactions committed (see `EnqueueOptions.order`), and a row that keeps
   * failing holds back only its own destination's key. Also the SQS FIFO
   * `MessageGroupId` and the Kafka record key. Default: none (no order with any other
   * row). At most 1000 characters.
   */
  orderingKey?: string;
  /** String headers passed to the publisher (SQS attributes, Kafka headers, HTTP headers). */
  headers?: Record<string, string>;
  /** Overrides the content type derived from `payload`. */
  contentType?: string;
  /** Publish no earlier than this many ms after the commit. Default 0. */
  delayMs?: number;
}

/** Options of {@link enqueue}: where the outbox table is, and which order a key keeps. */
export interface EnqueueOptions extends OutboxTableOptions {
  /**
   * The order the rows of one destination and ordering key are published in.
   * - `'commit'` (default): the order their transactions committed. `enqueue` takes a
   *   transaction-scoped lock on the destination and key, so a second transaction that
   *   enqueues a row of the key waits at its `enqueue` until the first commits or rolls
   *   back: a key's enqueuing transactions run one after the other from their `enqueue`
   *   on. Rows of other keys, and rows without a key, never wait.
   * - `'enqueue'`: the order their `enqueue` calls ran, without the lock. Two
   *   transactions of one key that overlap and commit in the other order are published
   *   in enqueue order, not commit order. For keys whose writers already serialise
   *   themselves (a row lock taken before `enqueue`), or where enqueue order is enough.
   *
   * Use one mode per key: a row enqueued with `'enqueue'` does not wait for the lock.
   */
  order?: 'commit' | 'enqueue';
}

const MAX_DESTINATION = 200;
const MAX_ORDERING_KEY = 1000;
const MAX_DELAY_MS = 365 * 86_400_000;

/** The content types `enqueue` derives; publishers read them back. */
export const CONTENT_TYPES = {
  json: 'application/json',
  text: 'text/plain; charset=utf-8',
  bytes: 'application/octet-stream',
} as const;

/**
 * Adds a message to the outbox in `tx`'s transaction and returns its id, a UUIDv7
 * that is its idempotency key downstream forever (the SQS deduplication id and
 * `eo-outbox-id` attribute, the Kafka `eo-outbox-id` header, the HTTP Idempotency-Key).
 * The row, and the NOTIFY that wakes the relays, take effect only if the transaction
 * commits: enqueue in the same transaction as the effect it follows from. A row with an
 * `orderingKey` first takes its destination and key's lock until the transaction ends,
 * unless `options.order` is `'enqueue'`: another transaction enqueuing a row of that key
 * waits here meanwhile.
 *
 * With a data layer, enqueue through its bridge in the layer's transaction, the one the
 * effect is written in: `enqueue(layer.sql(ctx.tx), message)` in a door's handler, or
 * `enqueue(layer.sql(tx), message)` inside your own `layer.transaction`. It is one
 * statement (the key's lock, the row and its NOTIFY in one `WITH`), so it runs as the
 * layer's raw-SQL call runs any single statement.
 *
 * @throws {@link OutboxMessageError} for a message it cannot store, before any SQL runs.
 */
export async function enqueue(
  tx: Queryable,
  message: OutboxMessage,
  options: EnqueueOptions = {},
): Promise<string> {
  const row = encodeMessage(message);
  const order = options.order ?? 'commit';
  if (order !== 'commit' && order !== 'enqueue')
    throw new OutboxMessageError('order', "must be 'commit' or 'enqueue'", { order });
  const ref = outboxRef(options);
  const id = uuidv7();
  const table = outboxRelations(ref).table;
  const locked = order === 'commit' && row.orderingKey !== null;
  // One round trip: the key's lock, the row and its notification. The lock comes first
  // (a materialised CTE the INSERT reads from), so the row's seq is drawn under it: a
  // key's rows then get their seq in the order their transactions commit. NOTIFY is
  // queued until COMMIT and dropped on ROLLBACK; identical ones of one transaction are
  // folded into one. pg_notify's void is read `::text`: a data layer may not decode void
  // (Prisma's adapter-pg fails the statement on it, after it ran).
  await tx.query(
    `WITH ${locked ? 'key_lock AS MATERIALIZED (SELECT pg_advisory_xact_lock($9::bigint)),' : ''}
     row AS (
       INSERT INTO ${table} (id, destination, ordering_key, payload, content_type, headers, available_at)
       SELECT $1::uuid, $2::text, $3::text, $4::bytea, $5::text, $6::jsonb,
              now() + $7::double precision * interval '1 millisecond'
       ${locked ? 'FROM key_lock' : ''}
       RETURNING id)
     SELECT pg_notify($8, '')::text FROM row`,
    [
      id,
      row.destination,
      row.orderingKey,
      row.payload,
      row.contentType,
      JSON.stringify(row.headers),
      row.delayMs,
      outboxChannel(ref),
      ...(locked ? [keyLockId(ref, row.destination, row.orderingKey!)] : []),
    ],
  );
  return id;
}

/**
 * The advisory lock of one destination and ordering key of one outbox table: 64 bits of
 * a SHA-256, so distinct keys practically never share a lock (and if they did, their
 * transactions would only wait for each other).
 */
export function keyLockId(ref: TableRef, destination: string, orderingKey: string): string {
  const digest = createHash('sha256')
    .update(`${ref.schema}\u0000${ref.table}\u0000${destination}\u0000${orderingKey}`)
    .digest();
  return digest.readBigInt64BE(0).toString();
}

/** The LISTEN/NOTIFY channel of one outbox table (a hash: channel names are short). */
export function outboxChannel(ref: TableRef): string {
  const digest = createHash('sha256').update(`${ref.schema}.${ref.table}`).digest('hex');
  return `eo_outbox_${digest.slice(0, 24)}`;
}

interface EncodedMessage {
  destination: string;
  orderingKey: string | null;
  payload: Buffer;
  contentType: string;
  headers: Record<string, string>;
  delayMs: number;
}

/** Validates and encodes a message; throws {@link OutboxMessageError} on bad input. */
export function encodeMessage(message: OutboxMessage): EncodedMessage {
  if (message === null || typeof message !== 'object')
    throw new OutboxMessageError('message', 'must be an object');
  const { destination, orderingKey, headers, contentType, delayMs } = message;
  if (typeof destination !== 'string' || destination.length === 0)
    throw new OutboxMessageError('destination', 'must be a non-empty string', { destination });
  if (destination.length > MAX_DESTINATION)
    throw new OutboxMessageError('destination', `must be at most ${MAX_DESTINATION} characters`);
  checkText('destination', destination);
  if (orderingKey !== undefined) {
    if (typeof orderingKey !== 'string' || orderingKey.length === 0)
      throw new OutboxMessageError('orderingKey', 'must be a non-empty string when given');
    if (orderingKey.length > MAX_ORDERING_KEY)
      throw new OutboxMessageError('orderingKey', `must be at most ${MAX_ORDERING_KEY} characters`);
    checkText('orderingKey', orderingKey);
  }
  const checkedHeaders: Record<string, string> = {};
  if (headers !== undefined) {
    if (headers === null || typeof headers !== 'object' || Array.isArray(headers))
      throw new OutboxMessageError('headers', 'must be an object of strings');
    for (const [name, value] of Object.entries(headers)) {
      if (name.length === 0 || typeof value !== 'string')
        throw new OutboxMessageError('headers', `"${name}" must be a named string`, { name });
      checkText(`headers.${name}`, name);
      checkText(`headers.${name}`, value);
      checkedHeaders[name] = value;
    }
  }
  if (
    delayMs !== undefined &&
    !(Number.isFinite(delayMs) && delayMs >= 0 && delayMs <= MAX_DELAY_MS)
  )
    throw new OutboxMessageError('delayMs', 'must be a number of ms from 0 to a year', { delayMs });
  if (contentType !== undefined && (typeof contentType !== 'string' || contentType.length === 0))
    throw new OutboxMessageError('contentType', 'must be a non-empty string when given');
  const { payload, type } = encodePayload(message.payload);
  return {
    destination,
    orderingKey: orderingKey ?? null,
    payload,
    contentType: contentType ?? type,
    headers: checkedHeaders,
    delayMs: delayMs ?? 0,
  };
}

function encodePayload(payload: unknown): { payload: Buffer; type: string } {
  if (payload instanceof Uint8Array)
    return {
      payload: Buffer.from(payload.buffer, payload.byteOffset, payload.byteLength),
      type: CONTENT_TYPES.bytes,
    };
  if (typeof payload === 'string')
    return { payload: Buffer.from(payload), type: CONTENT_TYPES.text };
  let json: string | undefined;
  try {
    json = JSON.stringify(payload);
  } catch (cause) {
    throw new OutboxMessageError('payload', `cannot be serialised as JSON: ${String(cause)}`);
  }
  if (json === undefined)
    throw new OutboxMessageError('payload', `cannot be serialised as JSON (got ${typeof payload})`);
  return { payload: Buffer.from(json), type: CONTENT_TYPES.json };
}

// Postgres text and jsonb cannot hold NUL, and a lone surrogate is not valid UTF-8.
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

function checkText(field: string, value: string): void {
  if (value.includes('\u0000'))
    throw new OutboxMessageError(field, 'contains a NUL character, which Postgres cannot store');
  if (LONE_SURROGATE.test(value))
    throw new OutboxMessageError(field, 'contains a lone UTF-16 surrogate');
}
