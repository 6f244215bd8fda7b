// The library writes its statements with node-postgres's `$1…` placeholders; Knex's
// `raw(sql, bindings)` takes `?` ones, bound in order of appearance. Knex then turns each
// `?` back into `$n` (its pg client's positionBindings), without regard to quotes: every
// `?` of the text, a string literal's or a jsonb operator's included, becomes a
// parameter unless written `\?`, and backslashes right before a `?` are dropped. So the
// conversion reads the statement as Postgres does (strings, quoted identifiers,
// dollar-quoted bodies, comments), turns each `$n` outside them into `?` with its value
// (repeated and reordered as the text asks), escapes every literal `?`, and refuses what
// Knex cannot carry through unchanged rather than send a different statement.

/** A statement in Knex's `raw` form: `?` placeholders, one binding per `?`, in order. */
export interface KnexRawStatement {
  readonly sql: string;
  readonly bindings: unknown[];
}

const IDENT = /[A-Za-z0-9_$\u0080-\uffff]/;
const DOLLAR_TAG = /^\$([A-Za-z_\u0080-\uffff][A-Za-z0-9_\u0080-\uffff]*)?\$/;

/**
 * Rewrites `text` (one statement, `$1…` bound to `values`) into Knex's `raw` form.
 * Throws a TypeError for a statement Knex would change (a `?` right after a backslash)
 * and for placeholders that do not match `values` (a `$n` past its end, or a value no
 * `$n` uses: node-postgres would have the server refuse both).
 */
export function toKnexRaw(text: string, values: readonly unknown[] = []): KnexRawStatement {
  let sql = '';
  const bindings: unknown[] = [];
  const used = new Set<number>();
  let i = 0;

  // Copies text[from, to) as it is, escaping each `?` for Knex.
  const copy = (from: number, to: number): void => {
    for (let j = from; j < to; j++) {
      const c = text[j]!;
      if (c === '?') {
        if (sql.endsWith('\\')) throw unrepresentable(text);
        sql += '\\?';
      } else sql += c;
    }
  };

  while (i < text.length) {
    const c = text[i]!;
    const next = text[i + 1];
    const prev = i > 0 ? text[i - 1]! : '';
    if (c === "'") {
      const escapes = (prev === 'E' || prev === 'e') && !IDENT.test(text[i - 2] ?? '');
      const end = quoted(text, i, "'", escapes);
      copy(i, end);
      i = end;
    } else if (c === '"') {
      const end = quoted(text, i, '"', false);
      copy(i, end);
      i = end;
    } else if (c === '-' && next === '-') {
      const nl = text.indexOf('\n', i);
      const end = nl === -1 ? text.length : nl;
      copy(i, end);
      i = end;
    } else if (c === '/' && next === '*') {
      const end = blockComment(text, i);
      copy(i, end);
      i = end;
    } else if (c === '$' && !IDENT.test(prev)) {
      const digits = /^\$(\d+)/.exec(text.slice(i));
      if (digits) {
        const n = Number(digits[1]);
        if (n < 1 || n > values.length) {
          throw new TypeError(
            `$${digits[1]} has no value (${values.length} given) in: ${text.slice(0, 200)}`,
          );
        }
        if (sql.endsWith('\\')) throw unrepresentable(text);
        // `??` is Knex's identifier binding, and `\??` reads as one token to it.
        if (sql.endsWith('?')) sql += ' ';
        sql += '?';
        const value = values[n - 1];
        bindings.push(value === undefined ? null : value);
        used.add(n);
        i += digits[0].length;
        continue;
      }
      const tag = DOLLAR_TAG.exec(text.slice(i));
      if (tag) {
        const close = text.indexOf(tag[0], i + tag[0].length);
        const end = close === -1 ? text.length : close + tag[0].length;
        copy(i, end);
        i = end;
        continue;
      }
      copy(i, i + 1);
      i += 1;
    } else {
      copy(i, i + 1);
      i += 1;
    }
  }
  if (used.size !== values.length) {
    const unused = values.map((_, k) => k + 1).filter((n) => !used.has(n));
    throw new TypeError(
      `values ${unused.map((n) => `$${n}`).join(', ')} are not used in: ${text.slice(0, 200)}`,
    );
  }
  return { sql, bindings };
}

/** The index just past the quote opened at `start` (`''`/`""` doubled inside). */
function quoted(text: string, start: number, quote: string, backslashEscapes: boolean): number {
  let j = start + 1;
  while (j < text.length) {
    const c = text[j]!;
    if (backslashEscapes && c === '\\') j += 2;
    else if (c === quote && text[j + 1] === quote) j += 2;
    else if (c === quote) return j + 1;
    else j += 1;
  }
  return text.length;
}

/** The index just past the block comment opened at `start` (they nest in Postgres). */
function blockComment(text: string, start: number): number {
  let depth = 0;
  let j = start;
  while (j < text.length) {
    if (text.startsWith('/*', j)) {
      depth += 1;
      j += 2;
    } else if (text.startsWith('*/', j)) {
      depth -= 1;
      j += 2;
      if (depth === 0) return j;
    } else j += 1;
  }
  return text.length;
}

function unrepresentable(text: string): TypeError {
  return new TypeError(
    `Knex cannot pass a "?" (or a parameter) right after a backslash through unchanged: ${text.slice(0, 200)}`,
  );
}
