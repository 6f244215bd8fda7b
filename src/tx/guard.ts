import type { PoolClient } from 'pg';
import { TransactionControlError } from '../errors.js';
import { topLevelStatements } from './sql-statements.js';

// Statements that end or replace the claim's transaction. ROLLBACK TO [SAVEPOINT] is
// allowed: savepoints are how a handler recovers from a statement it expects to fail.
// Matched on statements whose comments topLevelStatements turned into spaces.
const CONTROL =
  /^\s*(?:BEGIN|START\s+TRANSACTION|COMMIT|END|ABORT|PREPARE\s+TRANSACTION|ROLLBACK(?!\s+(?:(?:WORK|TRANSACTION)\s+)?TO\b))\b/i;

/**
 * Whether any statement of `sql` ends or replaces the current transaction. Every one,
 * not only the first: in `SELECT 1; ROLLBACK` the claim's transaction would end, and the
 * handler's later writes would run in autocommit, applied again by the retry.
 *
 * Read both ways `standard_conforming_strings` allows: the session's setting is not
 * known here, and with it off `'a\'' ; COMMIT; --'` commits. The cost is refusing the
 * rare text that would end the transaction only under the setting it does not use.
 */
export function isTransactionControl(sql: string): boolean {
  return [false, true].some((backslashQuotes) =>
    topLevelStatements(sql, backslashQuotes).some((statement) => CONTROL.test(statement)),
  );
}

/**
 * The refusal a data-layer bridge gives a statement of the handler's that ends or replaces
 * the claim's transaction (undefined for any other): one message for every bridge.
 */
export function controlRefusal(sql: string): TransactionControlError | undefined {
  if (!isTransactionControl(sql)) return undefined;
  return new TransactionControlError(
    'a statement that ends the transaction: the library commits the claim with the effect (throw to roll back; savepoints are allowed)',
    { sql: sql.slice(0, 200) },
  );
}

type Callback = (error: Error | null, result?: unknown) => void;

/** What a query argument may carry its SQL in. */
interface QueryLike {
  text?: unknown;
  name?: unknown;
  cursor?: { text?: unknown } | null;
}

/** pg's record, per connection, of the statements it prepared by name (kept across checkouts). */
interface NamedStatements {
  connection?: {
    parsedStatements?: Record<string, string | undefined>;
    submittedNamedStatements?: Record<string, string | undefined>;
  };
}

/**
 * The SQL of `tx.query`'s first argument: a string, a config or `pg.Query`/pg-cursor
 * (`text`), pg-query-stream's QueryStream (on its inner cursor only), or a name alone,
 * which runs what the connection prepared under that name, maybe before this checkout.
 */
function queryText(first: unknown, client: PoolClient): unknown {
  if (typeof first === 'string') return first;
  const query = first as QueryLike | null | undefined;
  const text = query?.text ?? query?.cursor?.text;
  if (text !== undefined || typeof query?.name !== 'string') return text;
  const connection = (client as unknown as NamedStatements).connection;
  return (
    connection?.parsedStatements?.[query.name] ?? connection?.submittedNamedStatements?.[query.name]
  );
}

function refuseRelease(): never {
  throw new TransactionControlError(
    'release() is not allowed: the runner releases the connection after COMMIT',
  );
}
type AnyFunction = (...args: unknown[]) => unknown;

/**
 * The `ctx.tx` handed to handlers: the claim's client behind a proxy that refuses
 * `release()` and statements that end the transaction (the runner must COMMIT it
 * itself, after checking the claim is still in it), records the first failed
 * statement (to name it when COMMIT turns into a rollback), and refuses everything
 * once the handler's work is over ({@link end}, called when its promise settles).
 *
 * Ending at the handler's settlement, not at COMMIT, is what keeps a floating query
 * (`tx.query(a).then(() => tx.query(b))`, `forEach(async …)`) out of autocommit: `b`
 * would otherwise queue behind the COMMIT on the same connection and run outside the
 * claim's transaction. Queries sent before the end still run inside it; {@link settled}
 * lets the owner wait for them and see whether a late one was refused before it
 * commits.
 */
export class TransactionGuard implements ProxyHandler<PoolClient> {
  readonly tx: PoolClient;
  private failure: { error: unknown } | undefined;
  private ended = false;
  /** Queries sent through `tx` whose answer has not come yet. */
  private pending = 0;
  /** Queries were still in flight when the handler settled: their continuations may call `tx`. */
  private floating = false;
  private onIdle: (() => void) | undefined;
  private late: TransactionControlError | undefined;
  // Made on first use: most handlers only ever call tx.query.
  private queryFn: AnyFunction | undefined;
  private bound: Map<PropertyKey, { original: AnyFunction; bound: AnyFunction }> | undefined;

  constructor(private readonly client: PoolClient) {
    // The guard is its own proxy handler: one object per transaction, no closures.
    this.tx = new Proxy(client, this);
  }

  /** The first statement error seen through `tx`, if any. */
  get firstError(): unknown {
    return this.failure?.error;
  }

  /** The handler's work is over: `tx` refuses every further call. */
  end(): void {
    if (this.ended) return;
    this.ended = true;
    this.floating = this.pending > 0;
  }

  /**
   * Whether the handler may still be using the connection: it has not settled (its
   * work was given up on), or a query it sent has not been answered.
   */
  get busy(): boolean {
    return !this.ended || this.pending > 0 || running(this.client);
  }

  /** The first call refused because it came after {@link end}, if any. */
  get lateUse(): TransactionControlError | undefined {
    return this.late;
  }

  /**
   * Resolves once the queries sent before {@link end} have been answered and, if any
   * were still in flight then, once the continuations they released have run (one
   * macrotask), so a chained late call has been refused and shows in {@link lateUse}.
   * Immediate for a handler that awaited its queries: nothing is floating.
   *
   * Queries the guard cannot count (a submittable such as `pg.Query` or a cursor, a
   * callback given in the config object: pg returns no promise for them) are waited
   * for on the client itself: it is still running a statement the library did not send.
   */
  async settled(): Promise<void> {
    if (this.pending > 0) await new Promise<void>((resolve) => (this.onIdle = resolve));
    if (running(this.client)) {
      this.floating = true;
      await drained(this.client);
    }
    if (this.floating) await new Promise<void>((resolve) => setImmediate(resolve));
  }

  /**
   * The handler settled: ends `tx` ({@link end}) and resolves once what it left running
   * on the connection is answered ({@link settled}). Awaited as part of the handler's
   * work, so a statement it left floating that does not end is bounded by the handler's
   * timeout and given up on at a shutdown's hard stop, like a handler that never returns.
   */
  async finish(): Promise<void> {
    this.end();
    await this.settled();
  }

  /** {@link ProxyHandler.get}: `query` and `release` are ours, the rest is the client's. */
  get(target: PoolClient, property: PropertyKey): unknown {
    if (property === 'query') return (this.queryFn ??= (...args) => this.query(args));
    if (property === 'release') return refuseRelease;
    const value: unknown = Reflect.get(target, property, target);
    if (typeof value !== 'function') return value;
    this.bound ??= new Map();
    const cached = this.bound.get(property);
    if (cached?.original === value) return cached.bound;
    const fresh: AnyFunction = (value as AnyFunction).bind(target);
    this.bound.set(property, { original: value as AnyFunction, bound: fresh });
    return fresh;
  }

  private query(args: unknown[]): unknown {
    const client = this.client;
    const first = args[0];
    const text = queryText(first, client);
    const refusal = this.ended
      ? (this.late ??= new TransactionControlError(
          'the handler used ctx.tx after it returned: the transaction ends when the handler ' +
            "settles, so a query it leaves floating cannot run in the claim's transaction",
          typeof text === 'string' ? { statement: text.trim().slice(0, 200) } : {},
        ))
      : typeof text === 'string' && isTransactionControl(text)
        ? new TransactionControlError(
            `"${text.trim().slice(0, 40)}" would end the claim's transaction; the runner commits it`,
            { statement: text.trim().slice(0, 200) },
          )
        : undefined;
    const last = args[args.length - 1];
    if (refusal !== undefined) {
      if (typeof last === 'function') {
        process.nextTick(() => (last as Callback)(refusal));
        return undefined;
      }
      if (typeof (first as { submit?: unknown } | null)?.submit === 'function') throw refusal;
      return Promise.reject(refusal);
    }
    if (typeof last === 'function') {
      this.pending++;
      args[args.length - 1] = (error: Error | null, result?: unknown) => {
        this.answered(error ?? undefined);
        (last as Callback)(error, result);
      };
      return (client.query as AnyFunction).apply(client, args);
    }
    const result = (client.query as AnyFunction).apply(client, args);
    if (result instanceof Promise) {
      // Registered before the caller's own handlers, so `pending` drops before a chained
      // call runs (and is refused when the handler has settled).
      this.pending++;
      result.then(
        () => this.answered(undefined),
        (error: unknown) => this.answered(error),
      );
    }
    return result;
  }

  private answered(error: unknown): void {
    if (error !== undefined) this.record(error);
    if (--this.pending === 0 && this.onIdle !== undefined) {
      const idle = this.onIdle;
      this.onIdle = undefined;
      idle();
    }
  }

  private record(error: unknown): void {
    this.failure ??= { error };
  }
}

/** What the guard reads of pg's `Client` to see that it is still running a statement. */
interface ClientState {
  readyForQuery?: unknown;
  _queryable?: unknown;
  _ending?: unknown;
}

/** Whether `client` is running (or has queued) a statement and can still answer it. */
function running(client: PoolClient): boolean {
  const state = client as unknown as ClientState;
  return state.readyForQuery === false && state._queryable !== false && state._ending !== true;
}

/** Resolves when `client` has answered everything queued on it, or can answer nothing more. */
function drained(client: PoolClient): Promise<void> {
  return new Promise<void>((resolve) => {
    const done = (): void => {
      client.off('drain', done);
      client.off('error', done);
      client.off('end', done);
      resolve();
    };
    client.on('drain', done);
    client.on('error', done);
    client.on('end', done);
  });
}
