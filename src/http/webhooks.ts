import { ConfigurationError, EffectivelyOnceError } from '../errors.js';
import { checkScope } from './options.js';
import { readRequestBody } from './body.js';
import type { IdempotencyContext, IdempotentHandler } from './context.js';
import { IdempotencyKeyMissingError, WebhookVerificationError } from './errors.js';
import type { FingerprintMode } from './fingerprint.js';

/** Where a sender puts the id of a delivery, the same on every redelivery of it. */
export interface WebhookSource {
  /** The sender's name: the default scope is `webhook:<name>`. */
  readonly name: string;
  /** Where the id is, for error messages (`X-GitHub-Delivery header`). */
  readonly describe: string;
  /** The delivery's id, or undefined when the request has none. */
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
 * of names (`['event', 'id']`). A body that is not JSON has no id.
 */
export function bodyFieldSource(name: string, path: string | readonly string[]): WebhookSource {
  const fields = typeof path === 'string' ? [path] : path;
  return {
    name,
    describe: `"${fields.join('.')}" field of the JSON body`,
    deliveryId: (_request, body) => {
      let value: unknown;
      try {
        value = JSON.parse(Buffer.from(body).toString('utf8'));
      } catch {
        return undefined;
      }
      for (const field of fields) {
        if (value === null || typeof value !== 'object') return undefined;
        value = (value as Record<string, unknown>)[field];
      }
      if (typeof value === 'number' && Number.isFinite(value)) return String(value);
      return typeof value === 'string' && value.length > 0 ? value : undefined;
    },
  };
}

/** Presets for senders whose delivery id is documented. */
export const webhookSources = {
  /** GitHub: `X-GitHub-Delivery`, a GUID kept on redeliveries. */
  github: headerSource('github', 'X-GitHub-Delivery'),
  /** Stripe: the event's `id` (`evt_…`) in the body; retries resend the same event. */
  stripe: bodyFieldSource('stripe', 'id'),
  /** Shopify: `X-Shopify-Webhook-Id`, the same on every retry of a webhook. */
  shopify: headerSource('shopify', 'X-Shopify-Webhook-Id'),
} as const;

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
   * `webhook:<source.name>`. It composes with the tenant, never replaces it: on an
   * endpoint whose scope is per request (a `scope` function, or an adapter's `scope`),
   * keys are stored under {@link webhookScope}`(this, tenant)`, so two tenants whose
   * sender numbers deliveries per account never share one; on an endpoint with a
   * constant scope, under this string alone, as before.
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
export type WebhookHandler = (
  request: Request,
  ctx: IdempotencyContext,
) => Response | void | Promise<Response | void>;

/** What a delivery turned into before the claim. */
export type WebhookAdmission =
  | {
      kind: 'admitted';
      /** The request again, its body readable. */
      request: Request;
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
 */
export async function admitDelivery(
  options: WebhookOptions,
  request: Request,
  maxBytes: number,
): Promise<WebhookAdmission> {
  let body: Uint8Array;
  try {
    body = await readRequestBody(request, maxBytes);
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
        (await Promise.resolve()
          .then(() => verify(copy(), body))
          .then(
            (ok) => ok === true,
            () => false,
          )));
    if (!verified)
      return { kind: 'refused', error: new WebhookVerificationError(options.source.name) };
    const id = options.source.deliveryId(request, body);
    if (id === undefined)
      return { kind: 'refused', error: new IdempotencyKeyMissingError(options.source.describe) };
    return {
      kind: 'admitted',
      request: copy(),
      key: id,
      door: options.scope ?? `webhook:${options.source.name}`,
      fingerprint: options.compareBody === true ? undefined : IGNORE_BODY,
    };
  } catch (error) {
    if (error instanceof EffectivelyOnceError) return { kind: 'refused', error };
    return { kind: 'threw', error };
  }
}

/**
 * The scope a webhook delivery's key is stored under: the tenant and the sender's
 * namespace (`door`), composed so that no two different pairs give one string
 * (`["<tenant>","<door>"]`, the JSON of both). Without a per-request tenant (the
 * endpoint's scope is a constant) it is the door alone: the exact string keys were
 * stored under before scopes composed, so redeliveries of deliveries applied before an
 * upgrade are still recognised.
 */
export function webhookScope(door: string, tenant: string | undefined): string {
  return tenant === undefined ? door : JSON.stringify([tenant, door]);
}

/** A webhook handler as an idempotent one: nothing returned is 204. */
export function asIdempotentHandler(handler: WebhookHandler): IdempotentHandler {
  return async (request: Request, ctx: IdempotencyContext): Promise<Response> =>
    (await handler(request, ctx)) ?? new Response(null, { status: 204 });
}
