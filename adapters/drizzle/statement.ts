import { sql, type SQL, type SQLChunk } from 'drizzle-orm';
import { parameterPlaceholders } from '../../src/tx/sql-statements.js';

// The library's statements come as text with `$1…` placeholders and a values array;
// Drizzle's `tx.execute` takes its own `sql` chunks, where each `sql.param` renders as
// the next `$n` in order of appearance. So the text is cut at its placeholders and each
// value goes in as a parameter (never into the text), numbered as the text meant it: a
// placeholder used twice stays one parameter, so the server infers one type for it.

/**
 * `text` with `$1…` bound to `values`, as a Drizzle `sql` for `tx.execute`. Undefined
 * becomes NULL, as pg sends it (postgres.js refuses undefined).
 */
export function drizzleStatement(text: string, values: readonly unknown[]): SQL {
  const chunks: SQLChunk[] = [];
  // The text's placeholder number → the number Drizzle renders its parameter as.
  const renumbered = new Map<number, number>();
  let from = 0;
  for (const placeholder of parameterPlaceholders(text)) {
    chunks.push(sql.raw(text.slice(from, placeholder.start)));
    from = placeholder.end;
    const again = renumbered.get(placeholder.index);
    if (again !== undefined) {
      chunks.push(sql.raw(`$${again}`));
      continue;
    }
    if (placeholder.index < 1 || placeholder.index > values.length)
      throw new RangeError(
        `$${placeholder.index} has no value: the statement was given ${values.length}`,
      );
    renumbered.set(placeholder.index, renumbered.size + 1);
    const value = values[placeholder.index - 1];
    chunks.push(sql.param(value === undefined ? null : value));
  }
  chunks.push(sql.raw(text.slice(from)));
  return sql.join(chunks);
}
