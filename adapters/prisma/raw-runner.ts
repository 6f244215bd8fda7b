import type { SqlResult, SqlRunner } from '../../src/data-layer.js';

/**
 * Prisma's raw queries, as a transaction client (or the client itself) has them. Both
 * take the text with `$1…` placeholders and the values after it, sent as bound
 * parameters. `$queryRawUnsafe` resolves with the rows as objects (columns decoded by
 * Prisma: int8 as bigint, numeric as Decimal, timestamps as Date, bytea as Uint8Array,
 * json parsed; a type adapter-pg does not know, such as xid8, fails the statement, so
 * read such columns `::text`); `$executeRawUnsafe` with the count of rows affected.
 */
export interface PrismaRawQueries {
  /** Runs a statement, resolves with its rows. */
  $queryRawUnsafe<T = unknown>(query: string, ...values: unknown[]): PromiseLike<T>;
  /** Runs a statement, resolves with the number of rows it affected. */
  $executeRawUnsafe(query: string, ...values: unknown[]): PromiseLike<number>;
}

// The first keyword, after any leading blanks and comments.
const LEADING = /^(?:\s+|--[^\n\r]*|\/\*[\s\S]*?\*\/)*([A-Za-z]+)/;
const ROW_RETURNING = new Set(['SELECT', 'WITH', 'VALUES', 'TABLE', 'SHOW', 'EXPLAIN', 'FETCH']);
const DATA_CHANGING = new Set(['INSERT', 'UPDATE', 'DELETE', 'MERGE']);

/**
 * Runs the library's statements through Prisma's raw queries on `client`. Prisma has no
 * call that answers with both rows and a row count, so the statement's first keyword
 * chooses: a query (SELECT, WITH…) or a data change with RETURNING goes through
 * `$queryRawUnsafe` (rowCount: the rows, as pg counts them for SELECT and RETURNING;
 * null after WITH, whose count pg takes from the outer statement), anything else through
 * `$executeRawUnsafe` (no rows; rowCount: what it affected).
 */
export function prismaSql(client: PrismaRawQueries): SqlRunner {
  return {
    async query<R extends object = Record<string, unknown>>(
      text: string,
      values: readonly unknown[] = [],
    ): Promise<SqlResult<R>> {
      const keyword = LEADING.exec(text)?.[1]?.toUpperCase() ?? '';
      const returnsRows =
        ROW_RETURNING.has(keyword) || (DATA_CHANGING.has(keyword) && /\bRETURNING\b/i.test(text));
      if (returnsRows) {
        const rows = await client.$queryRawUnsafe<R[]>(text, ...values);
        return { rows, rowCount: keyword === 'WITH' ? null : rows.length };
      }
      const affected = await client.$executeRawUnsafe(text, ...values);
      return { rows: [], rowCount: affected };
    },
  };
}
