import { describe, expect, it } from '@jest/globals';
import { PgDialect } from 'drizzle-orm/pg-core';
import { drizzleStatement } from '../../../adapters/drizzle/statement.js';

// What Drizzle sends for the library's statement: the query its dialect builds from the
// chunks, as `tx.execute` does (`dialect.sqlToQuery`).
const sent = (text: string, values: unknown[]) =>
  new PgDialect().sqlToQuery(drizzleStatement(text, values));

describe('drizzleStatement', () => {
  it('sends the text as it is and the values as parameters', () => {
    expect(sent('SELECT $1::text AS a, $2::int AS b', ['x', 2])).toEqual({
      sql: 'SELECT $1::text AS a, $2::int AS b',
      params: ['x', 2],
      typings: ['none', 'none'],
    });
  });

  it('keeps a placeholder used twice one parameter', () => {
    const query = sent('UPDATE t SET a = $1 WHERE b = $2 OR c = $1', ['one', 'two']);
    expect(query.sql).toBe('UPDATE t SET a = $1 WHERE b = $2 OR c = $1');
    expect(query.params).toEqual(['one', 'two']);
  });

  it('numbers parameters in order of appearance, values following them', () => {
    const query = sent('SELECT $2::int, $1::text', ['one', 2]);
    expect(query.sql).toBe('SELECT $1::int, $2::text');
    expect(query.params).toEqual([2, 'one']);
  });

  it('binds an array as one parameter, a Buffer as it is, undefined as NULL', () => {
    const bytes = Buffer.from([1, 2]);
    const query = sent('SELECT $1::text[], $2::bytea, $3::text', [['a', 'b'], bytes, undefined]);
    expect(query.sql).toBe('SELECT $1::text[], $2::bytea, $3::text');
    expect(query.params).toEqual([['a', 'b'], bytes, null]);
  });

  it('leaves a $1 inside a string constant or a comment as text', () => {
    const query = sent("SELECT '$1' /* $1 */, $1::text", ["'); DROP TABLE t; --"]);
    expect(query.sql).toBe("SELECT '$1' /* $1 */, $1::text");
    expect(query.params).toEqual(["'); DROP TABLE t; --"]);
  });

  it('refuses a placeholder with no value', () => {
    expect(() => drizzleStatement('SELECT $2', ['only one'])).toThrow(RangeError);
  });
});
