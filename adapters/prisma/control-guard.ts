import { TransactionControlError } from '../../src/errors.js';
import { controlRefusal } from '../../src/tx/guard.js';

/** The raw-SQL methods of Prisma's client whose text this checks. */
const RAW = new Set(['$executeRawUnsafe', '$queryRawUnsafe', '$executeRaw', '$queryRaw']);

/** A `Prisma.sql`/`Prisma.raw` fragment: its text parts, parameters between them. */
interface SqlFragment {
  strings?: unknown;
}

/**
 * The SQL text of a raw call's first argument: a string (the `…Unsafe` forms), a tagged
 * template's strings or a `Prisma.sql` fragment's. Parameters are joined as `$1`: a
 * parameter is a value, never a keyword, so the statements read are the ones sent.
 */
function rawText(first: unknown): string | undefined {
  if (typeof first === 'string') return first;
  const strings = Array.isArray(first) ? first : (first as SqlFragment | null)?.strings;
  return Array.isArray(strings) && strings.every((s) => typeof s === 'string')
    ? strings.join('$1')
    : undefined;
}

function refused(message: string, details: Record<string, unknown>): Promise<never> {
  return Promise.reject(new TransactionControlError(message, details));
}

/**
 * Prisma's transaction client as the handler gets it: the same client (models, raw
 * calls, `$transaction` with a callback) behind a thin Proxy that refuses, before
 * anything is sent, what would take the effect out of the claim's transaction:
 *
 * - a raw statement that ends or replaces the transaction (`$executeRawUnsafe('ROLLBACK')`,
 *   `` $executeRaw`COMMIT` ``, …; savepoints pass), as the pg door refuses it: after a
 *   ROLLBACK the effect would autocommit with no claim, applied again by the retry;
 * - the array form `tx.$transaction([…])`, which Prisma runs as a batch transaction of
 *   its own on another connection, committed at once whatever the handler does next.
 *
 * The callback form `tx.$transaction(async (inner) => …)` is a savepoint of the claim's
 * transaction and passes; its `inner` client is guarded the same way.
 */
export function guardPrismaTx<Tx extends object>(tx: Tx): Tx {
  return new Proxy(tx, {
    get(target, property) {
      const value = Reflect.get(target, property, target) as unknown;
      if (typeof value !== 'function' || typeof property !== 'string') return value;
      const method = value as (...args: unknown[]) => unknown;
      if (RAW.has(property)) {
        return (...args: unknown[]) => {
          const text = rawText(args[0]);
          const refusal = text === undefined ? undefined : controlRefusal(text);
          if (refusal !== undefined) return Promise.reject(refusal);
          return Reflect.apply(method, target, args);
        };
      }
      if (property === '$transaction') {
        return (first: unknown, ...rest: unknown[]) => {
          if (typeof first !== 'function')
            return refused(
              "tx.$transaction([…]) runs its queries in a transaction of its own, committed outside the claim's: " +
                'write them on ctx.tx directly, or nest with tx.$transaction(async (inner) => …) for a savepoint',
              { call: '$transaction' },
            );
          const callback = first as (inner: object) => unknown;
          return Reflect.apply(method, target, [
            (inner: object) => callback(guardPrismaTx(inner)),
            ...rest,
          ]);
        };
      }
      return value;
    },
  });
}
