import { controlRefusal } from '../../src/tx/guard.js';

/** A tagged template's strings (they carry `raw`), parameters joined as `$1`. */
function templateText(first: unknown): string | undefined {
  if (!Array.isArray(first) || !('raw' in first)) return undefined;
  return first.every((part) => typeof part === 'string') ? first.join('$1') : undefined;
}

/** The refusal of `text`, rejected, when it ends the transaction. */
function refused(text: string | undefined): Promise<never> | undefined {
  const refusal = text === undefined ? undefined : controlRefusal(text);
  return refusal === undefined ? undefined : Promise.reject(refusal);
}

/**
 * postgres.js's transaction `sql` as the handler gets it: the same function and members
 * behind a thin Proxy that refuses, before anything is sent, a statement that ends or
 * replaces the claim's transaction, written as a tagged template (`` tx`ROLLBACK` ``)
 * or through `tx.unsafe('COMMIT')`, as the pg door refuses it: after a ROLLBACK the
 * effect would autocommit with no claim, applied again by the retry. Savepoints pass,
 * and `tx.savepoint(async (inner) => …)` hands its callback a client guarded the same
 * way. Helper calls (`tx(rows)`, `tx('column')`) are not templates and pass.
 */
export function guardPostgresTx<T extends object>(tx: T): T {
  return new Proxy(tx, {
    apply(target, thisArg, args: unknown[]) {
      return (
        refused(templateText(args[0])) ??
        Reflect.apply(target as (...a: unknown[]) => unknown, thisArg, args)
      );
    },
    get(target, property) {
      const value = Reflect.get(target, property, target) as unknown;
      if (typeof value !== 'function') return value;
      const method = value as (...args: unknown[]) => unknown;
      if (property === 'unsafe')
        return (...args: unknown[]) =>
          refused(typeof args[0] === 'string' ? args[0] : undefined) ??
          Reflect.apply(method, target, args);
      if (property === 'savepoint')
        return (...args: unknown[]) => {
          const at = args.findIndex((arg) => typeof arg === 'function');
          if (at < 0) return Reflect.apply(method, target, args);
          const callback = args[at] as (inner: object) => unknown;
          const wrapped = [...args];
          wrapped[at] = (inner: object) => callback(guardPostgresTx(inner));
          return Reflect.apply(method, target, wrapped);
        };
      return value;
    },
  });
}
