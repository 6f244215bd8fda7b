import type { SqlResult, SqlRunner } from '../../src/data-layer.js';

/**
 * Prisma's raw queries, as a transaction client (or the client itself) has them. Both
 * take the text with `$1…` placeholders and the values after it, sent as bound
 * parameters. `$queryRawUnsafe` resolves with the rows as objects (columns decoded by
 * Prisma: int8 as bigint, numeric as Decimal, timestamps as Date, bytea as Uint8Array
 * (handed on as a Buffer, as pg gives it),
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
        const rows = (await client.$queryRawUnsafe<R[]>(text, ...values)).map(withBuffers);
        return { rows, rowCount: keyword === 'WITH' ? null : rows.length };
      }
      const affected = await client.$executeRawUnsafe(text, ...values);
      return { rows: [], rowCount: affected };
    },
  };
}

/**
 * The row with each bytea column as a Buffer, as node-postgres gives it: Prisma decodes
 * bytea to a plain Uint8Array, and the library reads a stored payload hash as a Buffer
 * (`equals`). The Buffer shares the Uint8Array's memory.
 */
function withBuffers<R extends object>(row: R): R {
  let copy: Record<string, unknown> | undefined;
  for (const [column, value] of Object.entries(row)) {
    if (value instanceof Uint8Array && !Buffer.isBuffer(value)) {
      copy ??= { ...row } as Record<string, unknown>;
      copy[column] = Buffer.from(value.buffer, value.byteOffset, value.byteLength);
    }
  }
  return (copy as R | undefined) ?? row;
}
