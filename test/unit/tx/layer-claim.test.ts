/**
 * The consumer's claims inside a data layer's transaction: single statements (a layer
 * runs one per call), the transaction found open (no BEGIN: the layer began it and the
 * library set its isolation level), the transaction id read by the INSERT's RETURNING,
 * and an odd answer failing closed.
 */
import { describe, expect, it } from '@jest/globals';
import type { SqlRunner } from '../../../src/data-layer.js';
import { DatabaseError } from '../../../src/errors.js';
import { BatchClaimStatements } from '../../../src/store/batch-claim.js';
import { ClaimStatements } from '../../../src/store/claim.js';
import type { ClaimSession } from '../../../src/tx/claim-transaction.js';

function session(rows: (text: string) => object[]): ClaimSession & { sent: string[] } {
  const sent: string[] = [];
  const sql: SqlRunner = {
    query: async <R extends object>(text: string) => {
      sent.push(text);
      const r = rows(text) as R[];
      return { rows: r, rowCount: null };
    },
  };
  return { sql, pg: undefined, begins: false, sent };
}

const table = { schema: 'public', table: 'processed_messages' };
const isInsert = (text: string) => text.startsWith('INSERT');

describe('the claim in a data layer’s transaction', () => {
  it('runs one statement per call, begins nothing, and reads the xid from the INSERT', async () => {
    const s = session((text) => (isInsert(text) ? [{ effectively_once_xid: '91' }] : []));
    const claims = new ClaimStatements(table, 'serializable');
    expect(await claims.begin(s, 'c', 'k', null, 1234)).toEqual({ xid: '91' });
    expect(s.sent).toHaveLength(4);
    expect(s.sent.some((t) => /\bBEGIN\b/i.test(t))).toBe(false);
    expect(s.sent.every((t) => !t.includes(';'))).toBe(true);
    expect(s.sent[1]).toBe('SET LOCAL lock_timeout = 1234');
    expect(s.sent[2]).toMatch(/ON CONFLICT DO NOTHING RETURNING pg_current_xact_id\(\)::text/);
    expect(s.sent[3]).toContain("set_config('lock_timeout'");
  });

  it('a key processed before: no row, no xid', async () => {
    const s = session(() => []);
    expect(await new ClaimStatements(table, undefined).begin(s, 'c', 'k', null, 10)).toEqual({
      xid: null,
    });
  });

  it('fails closed on an odd answer', async () => {
    const odd = session((text) => (isInsert(text) ? [{ effectively_once_xid: 'x' }] : []));
    await expect(
      new ClaimStatements(table, undefined).begin(odd, 'c', 'k', null, 10),
    ).rejects.toThrow(DatabaseError);
    const two = session((text) =>
      isInsert(text) ? [{ effectively_once_xid: '1' }, { effectively_once_xid: '1' }] : [],
    );
    await expect(
      new ClaimStatements(table, undefined).begin(two, 'c', 'k', null, 10),
    ).rejects.toThrow(DatabaseError);
  });

  it('a batch: the keys claimed from the RETURNING rows, the same xid on each', async () => {
    const s = session((text) =>
      isInsert(text)
        ? [
            { message_key: 'a', effectively_once_xid: '5' },
            { message_key: 'c', effectively_once_xid: '5' },
          ]
        : [],
    );
    const claims = new BatchClaimStatements(table, undefined);
    const result = await claims.begin(
      s,
      'c',
      ['a', 'b', 'c'].map((key) => ({ key, hash: null })),
      10,
    );
    expect([...result.claimed].sort()).toEqual(['a', 'c']);
    expect(result.xid).toBe('5');
    expect(s.sent[2]).toMatch(/RETURNING message_key, pg_current_xact_id\(\)::text/);
  });
});
