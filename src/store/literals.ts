/**
 * SQL string literal for any string, with the same rules as pg's `escapeLiteral`
 * (quotes doubled; with a backslash, an E'' literal with backslashes doubled, so the
 * result is right whatever `standard_conforming_strings` says). Regex replaces, not
 * pg's per-character loop: batch claims escape kilobytes per statement.
 */
export function sqlLiteral(value: string): string {
  const quoted = value.replace(/'/g, "''");
  if (!value.includes('\\')) return `'${quoted}'`;
  return ` E'${quoted.replace(/\\/g, '\\\\')}'`;
}

/**
 * Postgres array input syntax for text-like elements (`{"a","b",NULL}`): every
 * element double-quoted with `\` and `"` backslash-escaped, so any string round-trips.
 * The result still goes through {@link sqlLiteral} before it enters a statement.
 */
export function arrayLiteral(values: ReadonlyArray<string | null>): string {
  let out = '{';
  for (let i = 0; i < values.length; i++) {
    const value = values[i];
    if (i > 0) out += ',';
    out += value === null || value === undefined ? 'NULL' : `"${value.replace(/[\\"]/g, '\\$&')}"`;
  }
  return out + '}';
}
