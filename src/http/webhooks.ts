import type { PoolClient } from 'pg';
import { isLosslessNumber, parse as parseLossless } from 'lossless-json';
import { untilAborted } from '../deadline.js';
import { ConfigurationError, EffectivelyOnceError } from '../errors.js';
import { checkScope, WEBHOOK_SCOPE_MARK } from './options.js';
import { readRequestBody } from './body.js';
import type { IdempotencyContext, IdempotentHandler } from './context.js';
import {
  IdempotencyKeyMissingError,
  WebhookDeliveryIdInvalidError,
  WebhookVerificationError,
} from './errors.js';
import type { FingerprintMode } from './fingerprint.js';

/** Where a sender puts the id of a delivery, the same on every redelivery of it. */
export interface WebhookSource {
  /** The sender's name: the default scope is `webhook:<name>`. */
  readonly name: string;
  /** Where the id is, for error messages (`X-GitHub-Delivery header`). */
  readonly describe: string;
  /**
   * The delivery's id, exactly as the sender wrote it, or undefined when the request has
   * none (answered 400 `EO_IDEMPOTENCY_KEY_MISSING`). It must be a non-empty string of
   * printable ASCII; anything else, or a thrown `WebhookDeliveryIdInvalidError`, is
   * answered 400 `EO_WEBHOOK_ID_INVALID`. Nothing is claimed either way.
   */
  deliveryId(request: Request, body: Uint8Array): string | undefined;
}

/** A sender that names the delivery in a header. */
export function headerSource(name: string, header: string): WebhookSource {
  return {
    name,
    describe: `${header} header`,
    deliveryId: (request) => request.headers.get(header)?.trim() || undefined,
  };
}

/**
 * A sender that names the delivery in the JSON body: `path` is a field name or a path
 * of names (`['event', 'id']`, an array's index as `'0'`). The id is read exactly as
 * written in the body's text, never through a JavaScript number, so two int64 ids past
 * 2^53 (`9007199254740993` and `…992`, which `JSON.parse` reads as one number) are two
 * deliveries:
 *
 * - a string is the id as it is (spaces and quotes included), if it is non-empty
 *   printable ASCII;
 * - an integer is its digits (`-12`, `9007199254740993`): JSON spells each integer one
 *   way, so one id is one key;
 * - absent, `null`, or a body that is not JSON: no id (400 `EO_IDEMPOTENCY_KEY_MISSING`);
 * - anything else (a fraction `1.5`, `10.0`, an exponent `1e3`, `-0`, a boolean, an
 *   object, an array, `""`, or a body giving one field twice with different values):
 *   refused, 400 `EO_WEBHOOK_ID_INVALID`, as no one key is that id's and only that id's.
 */
export function bodyFieldSource(name: string, path: string | readonly string[]): WebhookSource {
  const fields = typeof path === 'string' ? [path] : path;
  const describe = `"${fields.join('.')}" field of the JSON body`;
  return {
    name,
    describe,
    deliveryId: (_request, body) => {
      const value = readField(Buffer.from(body).toString('utf8'), fields, describe);
      if (value === undefined || value === null) return undefined;
      if (typeof value === 'string') {
        if (value.length === 0) throw new WebhookDeliveryIdInvalidError(describe, 'it is empty');
        return value;
      }
      if (isLosslessNumber(value)) {
        if (INTEGER.test(value.value)) return value.value;
        throw new WebhookDeliveryIdInvalidError(
          describe,
          'it is a number that is not an integer written without fraction or exponent',
        );
      }
      throw new WebhookDeliveryIdInvalidError(
        describe,
        `it is ${Array.isArray(value) ? 'an array' : typeof value === 'object' ? 'an object' : `a ${typeof value}`}, not a string or an integer`,
      );
    },
  };
}

/**
 * An integer as JSON writes it: no leading zero, no fraction, no exponent, so each
 * integer has one spelling; `-0` is refused (the number 0 spelt a second way).
 */
const INTEGER = /^(?:0|-?[1-9][0-9]*)$/;

/** A key's alphabet: printable ASCII, as in an Idempotency-Key header. */
const PRINTABLE = /^[\x20-\x7e]+$/;

/**
 * The value at `fields` in a JSON text, numbers as lossless-json's LosslessNumber (their
 * exact text). Undefined when the text is not JSON or a field on the path is absent.
 */
function readField(text: string, fields: readonly string[], describe: string): unknown {
  let value: unknown;
  try {
    value = parseLossless(text);
  } catch (error) {
    if (!isJson(text)) return undefined;
    // JSON that lossless-json cannot read: a key given twice with different values
    // (JSON.parse silently keeps the last, so the body has no one id), or nesting
    // deeper than its recursion goes.
    throw new WebhookDeliveryIdInvalidError(
      describe,
      error instanceof SyntaxError && /duplicate key/i.test(error.message)
        ? 'the body gives a field twice with different values'
        : 'the body is nested too deeply to be read exactly',
    );
  }
  for (const field of fields) {
    if (value === null || typeof value !== 'object' || isLosslessNumber(value)) return undefined;
    if (!Object.hasOwn(value, field)) return undefined;
    value = (value as Record<string, unknown>)[field];
  }
  return value;
}

function isJson(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

/**
 * A delivery id as an Idempotency-Key header value that parses back to exactly it: an
 * RFC 8941 String (`"…"`, `"` and `\` escaped), so the header parser neither trims
 * nor unquotes it (`" x"` and `"\"x\""` are not `x`).
 */
function asKeyHeader(id: string): string {
  return `"${id.replace(/[\\"]/g, '\\$&')}"`;
}

/**
 * Presets for senders whose delivery id is documented, each keyed on what the sender's
 * own guidance on duplicate deliveries names (docs/webhooks.md, "Presets", cites
 * the pages).
 */
export const webhookSources = {
  /**
   * GitHub: `X-GitHub-Delivery`, a GUID per delivery that a redelivery keeps ("Best
   * practices for using webhooks": use it to tell deliveries apart).
   */
  github: headerSource('github', 'X-GitHub-Delivery'),
  /**
   * Stripe: the event's `id` (`evt_…`) in the body; retries resend the same event
   * ("Handle duplicate events": log the event ids you have processed).
   */
  stripe: bodyFieldSource('stripe', 'id'),
  /**
   * Shopify: `X-Shopify-Event-Id`, the same on every duplicate of one event ("Ignore
   * duplicate webhooks"); `X-Shopify-Webhook-Id` only for a delivery without it. One
   * event is one key even when it arrives under another webhook id.
   */
  shopify: headersSource('shopify', ['X-Shopify-Event-Id', 'X-Shopify-Webhook-Id']),
} as const;

/** A sender that names the delivery in the first of `headers` present (described by the first). */
function headersSource(name: string, headers: readonly [string, ...string[]]): WebhookSource {
  return {
    name,
    describe: `${headers[0]} header`,
    deliveryId: (request) => {
      for (const header of headers) {
        const value = request.headers.get(header)?.trim();
        if (value) return value;
      }
      return undefined;
    },
  };
}

/** Checks a receiver's options when it is created. */
export function checkWebhookOptions(options: WebhookOptions): void {
  if (typeof options !== 'object' || options === null)
    throw new ConfigurationError('webhook', 'must be an object');
  if (typeof options.source?.deliveryId !== 'function' || typeof options.source.name !== 'string')
    throw new ConfigurationError(
      'webhook.source',
      'must be a WebhookSource (webhookSources.github, headerSource(…), bodyFieldSource(…))',
    );
  // Required: without verification a forged request carrying a real delivery's id
  // claims it first, and the genuine delivery is then "replayed", never applied.
  if (options.verify !== false && typeof options.verify !== 'function')
    throw new ConfigurationError(
      'webhook.verify',
      "is required: a function (request, body) checking the sender's signature, or " +
        'verify: false to accept unverified deliveries (anyone who can reach the route can ' +
        "then claim a real delivery's id before the sender does)",
    );
  if (options.scope !== undefined) checkScope(options.scope);
}

/** Options of a webhook receiver. */
export interface WebhookOptions {
  /** Where the delivery id is: a preset of {@link webhookSources}, or your own. */
  source: WebhookSource;
  /**
   * Required. Checks the delivery is genuine (the sender's signature over the raw
   * body), BEFORE anything is claimed: a forged request must not take a delivery id.
   * Return true to accept; false (or throw) answers 401. Signature schemes are the
   * sender's; use its SDK here.
   *
   * - `request`: a web `Request` (the Fetch API's), on every door: the web core, and
   *   Express and Fastify too (built from their request; its headers are the
   *   delivery's, e.g. `request.headers.get('x-hub-signature-256')`). Its body is
   *   readable, but use `body`.
   * - `body`: the raw bytes as received, before any parsing: what the sender signed.
   *
   * `false` accepts unverified deliveries, explicitly: anyone who can reach the route
   * can then send a real delivery's id first, so its genuine delivery is answered as a
   * redelivery and never applied. Use it only behind something that verifies (a
   * gateway) or for senders that sign nothing.
   */
  verify: ((request: Request, body: Uint8Array) => boolean | Promise<boolean>) | false;
  /**
   * The namespace of the sender's delivery ids (the door). Default
   * `webhook:<source.name>`. It composes with the tenant, never replaces it: keys are
   * stored under {@link webhookScope}`(this, tenant)`, the tenant being the endpoint's
   * per-request scope (a `scope` function, or an adapter's `scope`), or none on an
   * endpoint with a constant scope; so two tenants whose sender numbers deliveries per
   * account never share one, and no ordinary request's scope reaches a delivery's key.
   */
  scope?: string;
  /**
   * Whether a redelivery must carry the same body. Default false: senders change
   * fields between deliveries of one event (Stripe's `pending_webhooks`), and the id
   * plus the signature say it is the same delivery. With true, another body is 422.
   */
  compareBody?: boolean;
}

/**
 * A webhook handler: apply the event through `ctx.tx`. Return nothing for
 * `204 No Content`, or a Response (a 2xx is stored and replayed to redeliveries).
 */
export type WebhookHandler<Tx = PoolClient> = (
  request: Request,
  ctx: IdempotencyContext<Tx>,
) => Response | void | Promise<Response | void>;

/** What a delivery turned into before the claim. */
export type WebhookAdmission =
  | {
      kind: 'admitted';
      /** The request again, its body readable. */
      request: Request;
      /** The delivery id as an Idempotency-Key header value: it parses back to the id, exactly. */
      key: string;
      /** The sender's namespace (`options.scope`, default `webhook:<source>`); see {@link webhookScope}. */
      door: string;
      fingerprint: FingerprintMode | undefined;
    }
  | { kind: 'refused'; error: EffectivelyOnceError }
  | { kind: 'threw'; error: unknown };

const IGNORE_BODY: FingerprintMode = () => '';

/**
 * Verify, then key: runs `verify` on the raw body and reads the delivery id, so the
 * claim that follows is keyed on it. `request` in the result is readable again.
 * `stop` (the shutdown's hard stop) ends the body read and `verify`, unsettled: the
 * admission is then refused with `stop.reason`, whatever `verify` answers later.
 */
export async function admitDelivery(
  options: WebhookOptions,
  request: Request,
  maxBytes: number,
  stop: AbortSignal,
): Promise<WebhookAdmission> {
  let body: Uint8Array;
  try {
    body = await readRequestBody(request, maxBytes, stop);
    const copy = (): Request =>
      new Request(request.url, {
        method: request.method,
        headers: request.headers,
        body: body.byteLength === 0 ? null : body,
      });
    const verify = options.verify;
    // Fails closed: a receiver that reached here without its options checked (a
    // RequestOverrides.webhook passed to execute) and no verify function refuses.
    const verified =
      verify === false ||
      (typeof verify === 'function' &&
        // A verifier that throws on a bad signature (many SDKs do) refuses it too.
        (await untilAborted(
          Promise.resolve()
            .then(() => verify(copy(), body))
            .then(
              (ok) => ok === true,
              () => false,
            ),
          stop,
        )));
    if (!verified)
      return { kind: 'refused', error: new WebhookVerificationError(options.source.name) };
    const id = options.source.deliveryId(request, body);
    if (id === undefined)
      return { kind: 'refused', error: new IdempotencyKeyMissingError(options.source.describe) };
    if (typeof id !== 'string' || !PRINTABLE.test(id))
      return {
        kind: 'refused',
        error: new WebhookDeliveryIdInvalidError(
          options.source.describe,
          'a delivery id is a non-empty string of printable ASCII',
        ),
      };
    return {
      kind: 'admitted',
      request: copy(),
      key: asKeyHeader(id),
      door: options.scope ?? `webhook:${options.source.name}`,
      fingerprint: options.compareBody === true ? undefined : IGNORE_BODY,
    };
  } catch (error) {
    if (error instanceof EffectivelyOnceError) return { kind: 'refused', error };
    return { kind: 'threw', error };
  }
}

/**
 * The scope a webhook delivery's key is stored under: U+001F (refused in every plain
 * scope, the endpoint's, a `scope` function's, an adapter's, so no ordinary request's
 * scope is ever this string, whatever its tenant), then the JSON of the tenant and the sender's namespace (`door`),
 * `["<tenant>","<door>"]`, or of the door alone, `["<door>"]`, when there is no
 * per-request tenant (the endpoint's scope is a constant). No two different pairs, and
 * no pair and lone door, give one string.
 */
export function webhookScope(door: string, tenant: string | undefined): string {
  return WEBHOOK_SCOPE_MARK + JSON.stringify(tenant === undefined ? [door] : [tenant, door]);
}

/** A webhook handler as an idempotent one: nothing returned is 204. */
export function asIdempotentHandler<Tx>(handler: WebhookHandler<Tx>): IdempotentHandler<Tx> {
  return async (request: Request, ctx: IdempotencyContext<Tx>): Promise<Response> =>
    (await handler(request, ctx)) ?? new Response(null, { status: 204 });
}
