/** Defining a flow, and the pure rules its runs share: derived keys, JSON results, final errors. */
import { createHash } from 'node:crypto';
import { ConfigurationError } from '../errors.js';
import { DEFAULT_SCHEMA, tableRef } from '../store/identifiers.js';
import { DEFAULT_FLOWS_TABLE } from './table.js';
import type { FinalErrorClassifier, Flow, FlowAnswer, FlowFunction, FlowOptions } from './types.js';

/** Longest flow or step name: they are stored with every key and hashed into derived keys. */
const MAX_NAME_LENGTH = 200;

/**
 * Registers a flow under a stable `name`: its function drives recorded steps with `run`
 * and answers. Use the same flow in every door (an HTTP route, a consumer's handler) and
 * in the completer, which finds it by name.
 *
 * ```ts
 * const charge = defineFlow('charge', async (input: { cents: number }, run) => {
 *   const order = await run.step('order', (tx) => insertOrder(tx, input));
 *   const c = await run.call('charge', (key) => provider.charge(order, { idempotencyKey: key }));
 *   await run.step('record', (tx) => tx.query('UPDATE orders SET charge = $1 WHERE id = $2', [c.id, order.id]));
 *   return { status: 201, body: { order: order.id, charge: c.id } };
 * });
 * ```
 */
export function defineFlow<I = unknown>(
  name: string,
  fn: FlowFunction<I>,
  options: FlowOptions = {},
): Flow<I> {
  checkName('name', name);
  if (typeof fn !== 'function') throw new ConfigurationError('fn', 'must be a function');
  if (options.version !== undefined) checkName('version', options.version);
  if (options.finalError !== undefined && typeof options.finalError !== 'function')
    throw new ConfigurationError('finalError', 'must be a function');
  return Object.freeze({
    name,
    version: options.version,
    fn,
    finalError: options.finalError ?? defaultFinalError,
  });
}

/** A flow or step name: non-empty text of at most MAX_NAME_LENGTH characters. */
export function checkName(option: string, name: unknown): asserts name is string {
  if (typeof name !== 'string' || name.length === 0 || name.length > MAX_NAME_LENGTH)
    throw new ConfigurationError(
      option,
      `must be a non-empty string of at most ${MAX_NAME_LENGTH} characters`,
    );
  if (name.includes('\u0000')) throw new ConfigurationError(option, 'must not contain NUL');
}

/** Statuses of a failure that a retry of the same request may turn into a success. */
const RETRYABLE_CLIENT_STATUSES = new Set([408, 409, 425, 429]);

/**
 * The default {@link FinalErrorClassifier}: an error carrying a 4xx `status` or
 * `statusCode` (an HTTP client's error for a provider's answer) is final, except 408,
 * 409, 425 and 429, which a retry may turn around: the provider decided (a declined
 * card's 402), so the flow ends with that status and a problem body naming the step.
 * Everything else (network errors, 5xx, timeouts, a database step's SQL error) is
 * transient. `run.fail(…)` is final whatever the classifier says.
 */
export const defaultFinalError: FinalErrorClassifier = (error, step) => {
  const status = statusOf(error);
  if (status === undefined || status < 400 || status > 499 || RETRYABLE_CLIENT_STATUSES.has(status))
    return undefined;
  return {
    status,
    headers: { 'content-type': 'application/problem+json' },
    body: {
      type: 'about:blank',
      title: 'The step failed',
      status,
      step,
      detail: error instanceof Error ? error.message : String(error),
    },
  };
};

function statusOf(error: unknown): number | undefined {
  if (typeof error !== 'object' || error === null) return undefined;
  const candidate = error as { status?: unknown; statusCode?: unknown };
  const status = candidate.status ?? candidate.statusCode;
  return typeof status === 'number' && Number.isInteger(status) ? status : undefined;
}

/**
 * The key an outside call sends (its provider's idempotency key): the same for a flow's
 * key and step on every run and owner, and different for any other. A flows table other
 * than the default `public.eo_flows` (`schema`, `table`) is part of it: two services that
 * separate by table or schema on one database may share a provider account too, and each
 * one's `order-42` is its own. A hash, so it fits providers' limits (Stripe's 255
 * characters) whatever the key's length: `eo_` and 43 base64url characters.
 */
export function derivedKey(
  scope: string,
  key: string,
  flow: string,
  step: string,
  flowsTable: { schema?: string | undefined; table?: string | undefined } = {},
): string {
  const ref = tableRef({
    schema: flowsTable.schema,
    table: flowsTable.table ?? DEFAULT_FLOWS_TABLE,
  });
  // The default table adds no parts, so its keys stay what they were (pinned: a flow in
  // flight across a deploy sends the same key). The parts are length-prefixed, so six
  // parts never hash the bytes of four.
  const isDefault = ref.schema === DEFAULT_SCHEMA && ref.table === DEFAULT_FLOWS_TABLE;
  const parts = isDefault
    ? [scope, key, flow, step]
    : [ref.schema, ref.table, scope, key, flow, step];
  const hash = createHash('sha256');
  for (const part of parts) {
    const bytes = Buffer.from(part, 'utf8');
    const length = Buffer.alloc(4);
    length.writeUInt32BE(bytes.byteLength);
    hash.update(length).update(bytes);
  }
  return `eo_${hash.digest('base64url')}`;
}

/** What a JSON round trip leaves of `value`, with the text stored; throws when JSON cannot hold it. */
export function jsonRoundTrip(value: unknown): { text: string | undefined; value: unknown } {
  if (value === undefined) return { text: undefined, value: undefined };
  if (typeof value === 'function' || typeof value === 'symbol')
    throw new TypeError(`a ${typeof value} is not JSON`);
  const text = JSON.stringify(value);
  // JSON.stringify answers undefined for a value with a toJSON that returns nothing.
  if (text === undefined) return { text: undefined, value: undefined };
  return { text, value: JSON.parse(text) as unknown };
}

/** A flow's answer as stored: a status in range, headers of strings, a JSON body. */
export function checkAnswer(answer: unknown): FlowAnswer {
  if (typeof answer !== 'object' || answer === null)
    throw new TypeError('a flow must return { status, body?, headers? }');
  const { status, body, headers } = answer as FlowAnswer;
  if (!Number.isInteger(status) || status < 100 || status > 599)
    throw new TypeError(
      `a flow's answer needs an integer status in 100–599 (got ${String(status)})`,
    );
  if (headers !== undefined) {
    if (typeof headers !== 'object' || headers === null)
      throw new TypeError('headers must be an object');
    for (const v of Object.values(headers))
      if (typeof v !== 'string') throw new TypeError('header values must be strings');
  }
  const round = jsonRoundTrip(body);
  return {
    status,
    ...(round.value !== undefined ? { body: round.value } : {}),
    ...(headers !== undefined ? { headers: { ...headers } } : {}),
  };
}

/**
 * Thrown by `run.fail`: the flow's final answer, carried out of the function (and out of
 * the step or call that threw it) to be stored.
 */
export class FlowFailure extends Error {
  constructor(readonly answer: FlowAnswer) {
    super(`the flow failed with a final answer (${answer.status})`);
    this.name = 'FlowFailure';
  }
}
