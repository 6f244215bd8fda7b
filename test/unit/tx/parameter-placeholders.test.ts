import { describe, expect, it } from '@jest/globals';
import { parameterPlaceholders } from '../../../src/tx/sql-statements.js';

const indexes = (sql: string) => parameterPlaceholders(sql).map((p) => p.index);

describe('parameterPlaceholders', () => {
  it('finds each $n, in order, with where it starts and ends', () => {
    expect(parameterPlaceholders('SELECT $2, $10 + $1')).toEqual([
      { start: 7, end: 9, index: 2 },
      { start: 11, end: 14, index: 10 },
      { start: 17, end: 19, index: 1 },
    ]);
  });

  it.each([
    ["SELECT '$1', $2", [2]],
    ["SELECT 'it''s $1', $2", [2]],
    ["SELECT E'\\' $1', $2", [2]],
    ['SELECT "$1" FROM t WHERE x = $2', [2]],
    ['SELECT $$ $1 $$, $2', [2]],
    ['SELECT $tag$ $1 $$ $tag$, $2', [2]],
    ['SELECT 1 -- $1\n, $2', [2]],
    ['SELECT /* $1 /* $3 */ $4 */ $2', [2]],
    // An identifier may contain $: a$1 is a name, not a parameter.
    ['SELECT a$1, $2 FROM t', [2]],
    ['SELECT $1::int[], $1', [1, 1]],
  ])('reads %j as text around its parameters', (sql, expected) => {
    expect(indexes(sql)).toEqual(expected);
  });
});
