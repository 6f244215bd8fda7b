import type { PoolClient } from 'pg';
import { TransactionControlError } from '../errors.js';

// Whitespace and comments before the first keyword of a statement.
const LEADING = /^(?:\s+|--[^\n]*(?:\n|$)|\/\*[\s\S]*?\*\/)*/;
// Statements that end or replace the claim's transaction. ROLLBACK TO [SAVEPOINT] is
// allowed: savepoints are how a handler recovers from a statement it expects to fail.
const CONTROL =
  /^(?:BEGIN|START\s+TRANSACTION|COMMIT|END|ABORT|PREPARE\s+TRANSACTION|ROLLBACK(?!\s+(?:(?:WORK|TRANSACTION)\s+)?TO\b))\b/i;

/** Whether `sql` starts with a statement that ends or replaces the current transaction. */
export function isTransactionControl(sql: string): boolean {
  return CONTROL.test(sql.replace(LEADING, ''));
}

type Callback = (error: Error | null, result?: unknown) => void;

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
 * once the transaction is over, so a handler that kept a reference cannot write into
 * the next delivery's transaction on the same pooled connection.
 */
export class TransactionGuard implements ProxyHandler<PoolClient> {
  readonly tx: PoolClient;
  private failure: { error: unknown } | undefined;
  private ended = false;
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

  /** The transaction is over: `tx` refuses every further call. */
  end(): void {
    this.ended = true;
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
    const text =
      typeof first === 'string' ? first : (first as { text?: unknown } | null | undefined)?.text;
    const refusal = this.ended
      ? new TransactionControlError(
          'the transaction has ended: ctx.tx cannot be used after the handler returned',
        )
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
      args[args.length - 1] = (error: Error | null, result?: unknown) => {
        if (error) this.record(error);
        (last as Callback)(error, result);
      };
      return (client.query as AnyFunction).apply(client, args);
    }
    const result = (client.query as AnyFunction).apply(client, args);
    if (result instanceof Promise) result.then(undefined, (error: unknown) => this.record(error));
    return result;
  }

  private record(error: unknown): void {
    this.failure ??= { error };
  }
}
