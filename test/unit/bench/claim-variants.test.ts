import { describe, expect, it } from '@jest/globals';
import {
  CLAIM_VARIANTS,
  claimVariantDdl,
  tableVariantDdl,
} from '../../../bench/http/claim-variants.js';

const variant = (id: string) => {
  const found = CLAIM_VARIANTS.find((v) => v.id === id);
  if (found === undefined) throw new Error(`no variant ${id}`);
  return claimVariantDdl('bench', 'keys', found);
};

/** The statements of a PL/pgSQL body, one per line, trimmed. */
const lines = (sql: string) => sql.split('\n').map((l) => l.trim());

describe('the claim function variants the SQL bench measures', () => {
  it('each function variant is created beside the shipped function, under its own name', () => {
    for (const v of CLAIM_VARIANTS.filter((c) => c.rewrite !== undefined)) {
      const { sql, to } = claimVariantDdl('bench', 'keys', v);
      expect(sql).toContain(`"bench"."keys${to}"(p_scope text`);
      expect(sql).not.toMatch(/_claim_v\d/);
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

  const table = (id: string): string[] => {
    const found = CLAIM_VARIANTS.find((v) => v.id === id);
    if (found === undefined) throw new Error(`no variant ${id}`);
    return tableVariantDdl('bench', 'keys', found);
  };

  it('each table variant is the whole DDL under its own table name', () => {
    for (const v of CLAIM_VARIANTS.filter((c) => c.table !== undefined)) {
      const own = `keys_${v.id.replaceAll('-', '_')}`;
      const ddl = tableVariantDdl('bench', 'keys', v).join('\n');
      expect(ddl).toContain(`"bench"."${own}"`);
      expect(ddl).toContain(`"bench"."${own}_claim_v1"(p_scope text`);
      expect(ddl).not.toMatch(/"bench"\."keys"[ (]/);
    }
  });

  it('brin: the created_at index is a BRIN', () => {
    const index = table('brin').filter((s) => /^CREATE INDEX.*created_at/.test(s));
    expect(index).toHaveLength(1);
    expect(index[0]).toMatch(/ USING brin \(\s*"?created_at"?\)/);
  });

  it('no-time-index: no index on created_at (the expiry index, which pruning scans, stays)', () => {
    const indexes = table('no-time-index').filter((s) => s.startsWith('CREATE INDEX'));
    expect(indexes).toHaveLength(1);
    expect(indexes[0]).toMatch(/\("expires_at"\) WHERE/);
  });

  it('no-request-columns: the columns are nullable and the claim inserts the key alone', () => {
    const ddl = table('no-request-columns').join('\n');
    expect(ddl).not.toMatch(/(method|route|fingerprint)\s+\w+\s+NOT NULL/);
    expect(ddl).toMatch(
      /\(scope, idempotency_key, expires_at\)\s+VALUES \(p_scope, p_key,\s+coalesce\(now\(\)/,
    );
  });

  it('plain-commit: the stored response and COMMIT, without the check', () => {
    const found = CLAIM_VARIANTS.find((v) => v.id === 'plain-commit');
    expect(found?.commit?.('42', 'SELECT store()')).toBe('SELECT store(); COMMIT;');
  });
});
