/**
 * Splits SQL text into its top-level statements, the way Postgres's simple-query
 * protocol will run them: a `;` ends a statement only outside string constants
 * ('…', E'…' with backslash escapes), quoted identifiers ("…"), dollar-quoted bodies
 * ($$…$$, $tag$…$tag$) and comments (-- to the line's end, nested /* … *\/). Each
 * comment comes back as one space, as Postgres reads it, so a caller matching keywords
 * sees `PREPARE/**\/TRANSACTION` as `PREPARE TRANSACTION`. Only what the transaction
 * guard needs: where each statement starts and its first words; no parsing beyond.
 *
 * `backslashQuotes` reads the text as a session with `standard_conforming_strings`
 * off does: a backslash escapes the next character in a plain '…' string too.
 */
export function topLevelStatements(sql: string, backslashQuotes = false): string[] {
  const statements: string[] = [];
  let current = '';
  let start = 0;
  let i = 0;
  while (i < sql.length) {
    const c = sql[i]!;
    let end: number | undefined;
    if (c === "'") i = endOfQuoted(sql, i, "'", backslashQuotes || isEscapeString(sql, i));
    else if (c === '"') i = endOfQuoted(sql, i, '"', false);
    else if (c === '$' && !isIdentifierChar(sql[i - 1])) i = endOfDollarQuoted(sql, i);
    else if (c === '-' && sql[i + 1] === '-') end = endOfLine(sql, i);
    else if (c === '/' && sql[i + 1] === '*') end = endOfBlockComment(sql, i);
    else if (c === ';') {
      statements.push(current + sql.slice(start, i));
      current = '';
      start = ++i;
    } else i++;
    if (end !== undefined) {
      current += sql.slice(start, i) + ' ';
      start = i = end;
    }
  }
  statements.push(current + sql.slice(start));
  return statements;
}

/** A `$n` parameter in SQL text: where it starts and ends, and n. */
export interface ParameterPlaceholder {
  readonly start: number;
  readonly end: number;
  readonly index: number;
}

/**
 * The `$n` parameters of `sql`, in order, read as {@link topLevelStatements} reads the
 * text: a `$1` inside a string constant, a quoted identifier, a dollar-quoted body or a
 * comment is text, not a parameter. For a data layer's bridge that numbers parameters
 * itself (Drizzle's `sql.param` renders as the next `$n`), so the library's statements
 * can be cut at their parameters and bound without a value ever entering the text.
 */
export function parameterPlaceholders(sql: string): ParameterPlaceholder[] {
  const found: ParameterPlaceholder[] = [];
  let i = 0;
  while (i < sql.length) {
    const c = sql[i]!;
    if (c === "'") i = endOfQuoted(sql, i, "'", isEscapeString(sql, i));
    else if (c === '"') i = endOfQuoted(sql, i, '"', false);
    else if (c === '-' && sql[i + 1] === '-') i = endOfLine(sql, i);
    else if (c === '/' && sql[i + 1] === '*') i = endOfBlockComment(sql, i);
    else if (c === '$' && !isIdentifierChar(sql[i - 1])) {
      const parameter = /\$(\d+)/y;
      parameter.lastIndex = i;
      const digits = parameter.exec(sql);
      if (digits === null) i = endOfDollarQuoted(sql, i);
      else {
        found.push({ start: i, end: i + digits[0].length, index: Number(digits[1]) });
        i += digits[0].length;
      }
    } else i++;
  }
  return found;
}

function isIdentifierChar(c: string | undefined): boolean {
  return c !== undefined && /[A-Za-z0-9_$\u0080-\uffff]/.test(c);
}

/** `E'…'` (or `e'…'`), where a backslash escapes the next character. */
function isEscapeString(sql: string, quote: number): boolean {
  const prefix = sql[quote - 1];
  return (prefix === 'E' || prefix === 'e') && !isIdentifierChar(sql[quote - 2]);
}

/** Index after the closing `quote` (doubled quotes stay inside); the text's end if none. */
function endOfQuoted(sql: string, open: number, quote: string, backslashes: boolean): number {
  let i = open + 1;
  while (i < sql.length) {
    const c = sql[i]!;
    if (backslashes && c === '\\') i += 2;
    else if (c === quote && sql[i + 1] === quote) i += 2;
    else if (c === quote) return i + 1;
    else i++;
  }
  return sql.length;
}

/** A `--` comment ends at a carriage return as well as at a newline. */
function endOfLine(sql: string, from: number): number {
  const newline = /[\n\r]/g;
  newline.lastIndex = from;
  return newline.exec(sql) === null ? sql.length : newline.lastIndex;
}

/** Block comments nest in Postgres. */
function endOfBlockComment(sql: string, open: number): number {
  let depth = 0;
  let i = open;
  while (i < sql.length) {
    if (sql[i] === '/' && sql[i + 1] === '*') {
      depth++;
      i += 2;
    } else if (sql[i] === '*' && sql[i + 1] === '/') {
      depth--;
      i += 2;
      if (depth === 0) return i;
    } else i++;
  }
  return sql.length;
}

/** `$tag$…$tag$`; a `$` that opens no tag (a parameter such as `$1`) is skipped alone. */
function endOfDollarQuoted(sql: string, open: number): number {
  const tag = /^\$(?:[A-Za-z_\u0080-\uffff][A-Za-z0-9_\u0080-\uffff]*)?\$/.exec(sql.slice(open));
  if (tag === null) return open + 1;
  const close = sql.indexOf(tag[0], open + tag[0].length);
  return close < 0 ? sql.length : close + tag[0].length;
}
