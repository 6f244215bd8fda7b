/**
 * The library's `$1…` statements in Knex's `raw` form: what Knex finally sends
 * (`raw(sql, bindings).toSQL().toNative()`, its pg client's own rewriting back to `$n`)
 * must be the statement the library wrote, with the values in the order it numbered
 * them. Checked through a real Knex (no connection needed to compile).
 */
import { afterAll, describe, expect, it } from '@jest/globals';
import knexFactory from 'knex';
import { toKnexRaw } from '../../../adapters/knex/placeholders.js';

const knex = knexFactory({ client: 'pg' });
afterAll(() => knex.destroy());

/** What Knex would send for the library's `text` and `values`. */
function sent(text: string, values: unknown[] = []): { sql: string; bindings: unknown[] } {
  const { sql, bindings } = toKnexRaw(text, values);
  const native = knex
    .raw(sql, bindings as never)
    .toSQL()
    .toNative();
  return { sql: native.sql, bindings: [...native.bindings] };
}

describe('toKnexRaw', () => {
  it('keeps the order the text asks for: `$2 … $1`', () => {
    expect(sent('SELECT $2::int AS b, $1::text AS a', ['a', 2])).toEqual({
      sql: 'SELECT $1::int AS b, $2::text AS a',
      bindings: [2, 'a'],
    });
  });

  it('binds a repeated `$1` once per use', () => {
    expect(sent('SELECT $1::text = $1::text AS same, $2::int AS n', ['x', 7])).toEqual({
      sql: 'SELECT $1::text = $2::text AS same, $3::int AS n',
      bindings: ['x', 'x', 7],
    });
  });

  it('sends literal question marks as they are', () => {
    const text = `SELECT '?' AS q, '??' AS qq, $1::jsonb ? 'k' AS has, $1::jsonb ?| ARRAY['a'] AS any`;
    expect(sent(text, ['{"k":1}'])).toEqual({
      sql: `SELECT '?' AS q, '??' AS qq, $1::jsonb ? 'k' AS has, $2::jsonb ?| ARRAY['a'] AS any`,
      bindings: ['{"k":1}', '{"k":1}'],
    });
  });

  it('separates a literal `?` from a parameter that follows it', () => {
    // Knex reads `\??` as one binding and drops the literal `?`.
    expect(sent('SELECT $1::jsonb ?$2', ['{}', 'k'])).toEqual({
      sql: 'SELECT $1::jsonb ? $2',
      bindings: ['{}', 'k'],
    });
  });

  it('leaves `$n` in strings, quoted identifiers, dollar-quoted bodies and comments', () => {
    const text = [
      `SELECT '$1' AS s, E'it\\'s $1?' AS e, "$1" AS i, $q$ $1 ? $q$ AS d,`,
      `$$ $2 $$ AS dd, a$1 -- $1 ?`,
      `/* $1 /* nested ? */ $1 */ , $1::int AS p`,
    ].join('\n');
    expect(sent(text, [5])).toEqual({
      sql: text,
      bindings: [5],
    });
  });

  it('passes an array and a Buffer as one value each, and undefined as null', () => {
    const buffer = Buffer.from('x');
    expect(sent('SELECT $1::text[], $2::bytea, $3::text', [['a', 'b'], buffer, undefined])).toEqual(
      { sql: 'SELECT $1::text[], $2::bytea, $3::text', bindings: [['a', 'b'], buffer, null] },
    );
  });

  it('refuses a `?` right after a backslash, which Knex would change', () => {
    expect(() => toKnexRaw(`SELECT E'\\\\?'`)).toThrow(TypeError);
  });

  it('refuses a `$n` with no value and a value no `$n` uses', () => {
    expect(() => toKnexRaw('SELECT $1, $3', [1, 2, 3])).toThrow(/\$2 are not used/);
    expect(() => toKnexRaw('SELECT $1, $2', [1])).toThrow(/\$2 has no value/);
    expect(() => toKnexRaw('SELECT $0', [1])).toThrow(/\$0 has no value/);
  });
});
