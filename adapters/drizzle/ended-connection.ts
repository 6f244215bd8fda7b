import { TransactionControlError } from '../../src/errors.js';
import { controlRefusal } from '../../src/tx/guard.js';

/** The part of Drizzle's node-postgres session this reads and replaces. */
interface NodePgSessionLike {
  client: object;
}

/** Drizzle's own end of the transaction, which must still reach the connection. */
const ENDINGS = /^\s*(commit|rollback)\s*$/i;

function textOf(query: unknown): string | undefined {
  if (typeof query === 'string') return query;
  const text = (query as { text?: unknown } | null)?.text;
  return typeof text === 'string' ? text : undefined;
}

/**
 * Drizzle's node-postgres transaction object keeps the PoolClient it ran on after its
 * COMMIT and release: a statement the handler left floating on `ctx.tx` would run in
 * whatever transaction holds that connection next (another claim's, rolled back with
 * it, or the app's own). This puts a stand-in for the client into the transaction's
 * session (its own for a Pool-backed `db`, created per transaction) that, once
 * {@link EndedConnection.end} was called, refuses every statement but Drizzle's own
 * COMMIT and ROLLBACK with a TransactionControlError; the other members (release) pass.
 * Before that, while the handler runs, it refuses the statements that would end the
 * claim's transaction under it (`tx.execute(sql\`ROLLBACK\`)`: the effect would then
 * autocommit without the claim, applied again by the retry), as the pg door does.
 * Drizzle's BEGIN was sent before the stand-in is installed, its COMMIT/ROLLBACK come
 * after `end()`, and a nested `tx.transaction(…)` sends savepoints, which pass.
 *
 * A `db` over one `pg.Client` runs its transactions on the database's own session, which
 * the app keeps using: it is left alone, and a late statement there runs on that client
 * wherever it is then (docs/data-layers.md).
 */
export class EndedConnection {
  private ended = false;

  /** Guards `session`'s client, when `session` is the transaction's own (not `dbSession`). */
  constructor(session: unknown, dbSession: unknown) {
    if (session === dbSession) return;
    const own = session as NodePgSessionLike;
    const client = own.client as Record<string | symbol, unknown>;
    const query = client['query'];
    if (typeof query !== 'function') return;
    const refuse = (message: string) =>
      Promise.reject(new TransactionControlError(message, { layer: 'drizzle' }));
    own.client = new Proxy(client, {
      get: (target, property) => {
        if (property !== 'query') return target[property];
        return (...args: unknown[]) => {
          const text = textOf(args[0]) ?? '';
          if (this.ended && !ENDINGS.test(text))
            return refuse(
              "the claim's transaction is over: a statement sent on ctx.tx after the handler returned is refused",
            );
          const refusal = this.ended ? undefined : controlRefusal(text);
          if (refusal !== undefined) return Promise.reject(refusal);
          return Reflect.apply(query, target, args) as unknown;
        };
      },
    });
  }

  /** From now on only COMMIT and ROLLBACK reach the connection. */
  end(): void {
    this.ended = true;
  }
}
