import type { PoolClient } from 'pg';

/**
 * What an idempotent handler receives besides the request. `Tx`: the type of `tx`, a pg
 * client by default, the data layer's own transaction object with `dataLayer`.
 */
export interface IdempotencyContext<Tx = PoolClient> {
  /**
   * The open transaction that holds the key's claim. Write the effect through it: it
   * commits together with the stored response, or not at all.
   *
   * - Without `dataLayer`: a pg client. Statements that would end the transaction
   *   (BEGIN, COMMIT, ROLLBACK …) and `release()` are refused; use SAVEPOINT / ROLLBACK
   *   TO SAVEPOINT to recover from a statement you expect to fail.
   * - With `dataLayer`: that layer's own transaction object (Prisma's transaction
   *   client, a Knex `Transaction`, a TypeORM `EntityManager`, a Drizzle or Kysely
   *   transaction, postgres.js's `sql` inside `begin`), opened by the layer in its own
   *   idiom; write the effect as the layer's docs show. Do not end it yourself (the
   *   library commits it, after checking it is still the claim's). Outbox rows go in it
   *   with `enqueue(layer.sql(ctx.tx), message)`.
   */
  readonly tx: Tx;
  /** The idempotency key claimed (the header's, or a webhook's delivery id). */
  readonly key: string;
  /** The scope the key was claimed in (tenant, principal, webhook sender). */
  readonly scope: string;
  /**
   * Aborts when the handler runs past `handlerTimeoutMs` or the endpoint closes; the
   * transaction then rolls back. A client that disconnects does not abort it: the
   * effect commits (and its retry replays) or rolls back, cleanly either way.
   */
  readonly signal: AbortSignal;
  /** The request, its body readable (a fresh copy on every run of the handler). */
  readonly request: Request;
  /** The raw request body, as fingerprinted. */
  readonly body: Uint8Array;
  /** 1 on the first run; higher when a serialization failure made the transaction run again. */
  readonly attempt: number;
  /**
   * Marks a response whose body is a stream to send as it comes (server-sent events, a
   * large export): it is not buffered before COMMIT and not stored. A replay gets the
   * status and stored headers, an empty body and `Idempotent-Body-Omitted: stream`.
   * Returns the response.
   */
  streamed(response: Response): Response;
}

/**
 * An idempotent endpoint's handler, fetch-style: do the effect through `ctx.tx` and
 * return the response. A response whose status `rollbackOn` matches (500 and above by
 * default) rolls the effect back and is sent unstored, as is a throw (the client gets
 * a problem+json 500). Any other response is stored with the effect, committed, then
 * sent.
 */
export type IdempotentHandler<Tx = PoolClient> = (
  request: Request,
  ctx: IdempotencyContext<Tx>,
) => Response | Promise<Response>;

/** What the engine tells an adapter's handler beyond the public context (internal). */
export interface AdapterHooks {
  /** The endpoint's `maxBodyBytes`: the most of a body an adapter holds in memory. */
  readonly maxBodyBytes: number;
  /**
   * The handler's work is done: revokes `ctx.tx` now, in this tick, rather than when
   * the adapter's promise settles a few ticks later.
   */
  readonly workDone: () => void;
}

/** Where the engine puts {@link AdapterHooks} on the context it builds (not public). */
export const adapterHooks = Symbol('effectively-once.adapterHooks');

/** The hooks of a context the engine built; defaults for any other. */
export function hooksOf(ctx: IdempotencyContext<unknown>): AdapterHooks {
  const hooks = (ctx as { [adapterHooks]?: AdapterHooks })[adapterHooks];
  return hooks ?? { maxBodyBytes: 1024 * 1024, workDone: () => undefined };
}
