import { describe, expect, it } from '@jest/globals';
import type { PoolClient } from 'pg';
import { TransactionControlError } from '../../../src/errors.js';
import { isTransactionControl, TransactionGuard } from '../../../src/tx/guard.js';
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
    // Postgres ends a -- comment at a carriage return too.
    'SELECT 1; -- note\rCOMMIT',
    'SELECT 1 -- note\r; ROLLBACK',
    // Block comments nest before the keyword as well as inside a statement.
    'SELECT 1; /* a /* b */ c */ COMMIT',
    // A comment is whitespace between two keywords.
    "PREPARE/**/TRANSACTION 'x'",
    'START -- x\nTRANSACTION',
    // With standard_conforming_strings off, \' escapes the quote in a plain string.
    "SELECT 'a\\'' ; COMMIT; --'",
    "SELECT N'a\\'' ; COMMIT; --'",
    // The guard cannot see the setting: it refuses what either reading would end.
    "SELECT 'C:\\', '; COMMIT'",
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
    'SAVEPOINT a; ROLLBACK/**/TO a; ROLLBACK -- why\nTO SAVEPOINT a',
    "SELECT 'C:\\', 'a; b'",
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

  it('reads each comment as one space, a -- comment ending at CR or LF', () => {
    expect(topLevelStatements('a/* /* */ ; */b -- c\rd;e--f\ng')).toEqual(['a b  d', 'e g']);
  });

  it('reads backslash escapes in plain strings only when asked', () => {
    expect(topLevelStatements("'\\';x';y")).toEqual(["'\\'", "x';y"]);
    expect(topLevelStatements("'\\';x';y", true)).toEqual(["'\\';x'", 'y']);
  });

  it('keeps an unterminated quote, comment or tag to the end', () => {
    expect(topLevelStatements("SELECT 'a; COMMIT")).toEqual(["SELECT 'a; COMMIT"]);
    expect(topLevelStatements('SELECT 1 /* ; COMMIT')).toEqual(['SELECT 1  ']);
    expect(topLevelStatements('SELECT $q$ ; COMMIT')).toEqual(['SELECT $q$ ; COMMIT']);
  });
});

describe('TransactionGuard.tx.query', () => {
  // pg-query-stream's QueryStream keeps its SQL on its inner pg-cursor, not on itself.
  it('refuses a submittable whose SQL is on its cursor, before sending it', () => {
    const sent: unknown[] = [];
    const client = { query: (...args: unknown[]) => sent.push(args) } as unknown as PoolClient;
    const stream = { cursor: { text: 'COMMIT' }, submit: () => undefined };
    const tx = new TransactionGuard(client).tx;
    expect(() => tx.query(stream as never)).toThrow(TransactionControlError);
    expect(sent).toEqual([]);
  });

  // pg keeps a connection's named statements across pool checkouts: the name alone runs one.
  it('refuses a name that the connection prepared as transaction control', async () => {
    const sent: unknown[] = [];
    const client = {
      connection: { parsedStatements: { fin: 'COMMIT' }, submittedNamedStatements: {} },
      query: (...args: unknown[]) => sent.push(args),
    } as unknown as PoolClient;
    const tx = new TransactionGuard(client).tx;
    await expect(tx.query({ name: 'fin' } as never)).rejects.toThrow(TransactionControlError);
    expect(sent).toEqual([]);
  });
});
