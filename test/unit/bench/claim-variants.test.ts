import { describe, expect, it } from '@jest/globals';
import { CLAIM_VARIANTS, claimVariantDdl } from '../../../bench/http/claim-variants.js';

const variant = (id: string) => {
  const found = CLAIM_VARIANTS.find((v) => v.id === id);
  if (found === undefined) throw new Error(`no variant ${id}`);
  return claimVariantDdl('bench', 'keys', found);
};

/** The statements of a PL/pgSQL body, one per line, trimmed. */
const lines = (sql: string) => sql.split('\n').map((l) => l.trim());

describe('the claim function variants the SQL bench measures', () => {
  it('each is created beside the shipped function, under its own name', () => {
    for (const v of CLAIM_VARIANTS) {
      const { sql, to } = claimVariantDdl('bench', 'keys', v);
      expect(sql).toContain(`"bench"."keys${to}"(p_scope text`);
      expect(sql).not.toContain('_claim_v1');
    }
  });

  it('read-first: the stored row is read, and returned, before the INSERT', () => {
    const body = lines(variant('read-first').sql);
    const read = body.findIndex((l) => l.startsWith('RETURN QUERY SELECT NULL::text, k.method'));
    expect(body[read + 2]).toBe('IF FOUND THEN RETURN; END IF;');
    expect(read).toBeLessThan(body.findIndex((l) => l.startsWith('INSERT INTO')));
  });

  it('no-lock-timeout: no set_config left, the rest as shipped', () => {
    const { sql } = variant('no-lock-timeout');
    expect(sql).not.toContain("set_config('lock_timeout'");
    expect(sql).toContain('ON CONFLICT DO NOTHING');
  });

  it('assign: no PERFORM, and the answer rows come from RETURN NEXT', () => {
    const { sql } = variant('assign');
    expect(sql).not.toContain('PERFORM');
    expect(sql).toContain('xid := pg_current_xact_id_if_assigned()::text;');
    expect(lines(sql).filter((l) => l === 'RETURN NEXT;')).toHaveLength(2);
  });
});
