import { describe, expect, it } from '@jest/globals';
import { isTransactionControl } from '../../../src/tx/guard.js';
import { topLevelStatements } from '../../../src/tx/sql-statements.js';

describe('isTransactionControl', () => {
  it.each([
    'COMMIT',
    '  /* why */ -- and\n rollback',
    'SELECT 1; ROLLBACK',
    'INSERT INTO t VALUES (1);COMMIT AND CHAIN',
    "SELECT 'a'';'; END",
    "SELECT E'\\'; ' AS s; ABORT",
    'SELECT "x;y" FROM t; BEGIN',
    'SELECT $$ ; $$; START TRANSACTION',
    "SELECT $a$ $$ ; $a$; PREPARE TRANSACTION 'x'",
    'SELECT 1 /* a /* nested ; */ still ; */; COMMIT',
  ])('refuses %j', (sql) => {
    expect(isTransactionControl(sql)).toBe(true);
  });

  it.each([
    'SELECT 1',
    "SELECT 'x; COMMIT'",
    "SELECT E'\\'; COMMIT'",
    'SELECT "a; rollback" FROM t',
    'SELECT 1 -- ; COMMIT',
    'SELECT 1 /* ; COMMIT */',
    'DO $$ BEGIN PERFORM 1; END $$',
    'SELECT $1::int; SELECT $2',
    'SAVEPOINT a; ROLLBACK TO a; ROLLBACK TO SAVEPOINT a; RELEASE a',
    'SELECT committed FROM t; SELECT end_at FROM t',
    'SELECT 1;',
  ])('lets %j through', (sql) => {
    expect(isTransactionControl(sql)).toBe(false);
  });
});

describe('topLevelStatements', () => {
  it('splits only on top-level semicolons', () => {
    expect(topLevelStatements("SELECT ';'; SELECT $x$;$x$;SELECT 3")).toEqual([
      "SELECT ';'",
      ' SELECT $x$;$x$',
      'SELECT 3',
    ]);
  });

  it('keeps an unterminated quote, comment or tag to the end', () => {
    expect(topLevelStatements("SELECT 'a; COMMIT")).toEqual(["SELECT 'a; COMMIT"]);
    expect(topLevelStatements('SELECT 1 /* ; COMMIT')).toEqual(['SELECT 1 /* ; COMMIT']);
    expect(topLevelStatements('SELECT $q$ ; COMMIT')).toEqual(['SELECT $q$ ; COMMIT']);
  });
});
