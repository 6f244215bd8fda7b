/**
 * The `--http-sql` bench's pgbench scripts: the four modes' SQL, rendered by the
 * library's own builders, and (c)/(d) through each claim variant (claim-variants.ts).
 */
import { createHash } from 'node:crypto';
import { KeyStatements } from '../../src/http/store.js';
import { DEFAULT_KEY_LIFETIME_MS, DEFAULT_TABLE } from '../../src/http/options.js';
import { commitClaimSql } from '../../src/store/commit.js';
import {
  CLAIM_VARIANTS,
  claimVariantDdl,
  variantTable,
  type ClaimVariant,
} from './claim-variants.js';
import type { ModeId } from './report.js';

export const SCHEMA = 'eo_bench_http_sql';
export const STORED_KEYS = 1000;
const CHARGE = { customerId: 'cus_42', amountCents: 1999 };

/**
 * A mode of the report: one of the four; (c)/(d) through a claim variant (`c:brin`); or
 * the shipped (c)/(d) run right before that variant's (`c@brin`), its pair: a round of
 * every variant takes minutes on a machine whose load swings by the minute, so each
 * variant is priced against the shipped run next to it.
 */
export type SqlMode = ModeId | `${'c' | 'd'}${':' | '@'}${string}`;

/**
 * One pgbench command from a multi-statement round trip: pgbench ends a command at an
 * unquoted `;`, so the inner ones become `\;` (one compound query, one round trip).
 */
export function compound(sql: string): string {
  let out = '';
  let quoted = false;
  const trimmed = sql.trim().replace(/;$/, '');
  for (const ch of trimmed) {
    if (ch === "'") quoted = !quoted;
    out += ch === ';' && !quoted ? '\\;' : ch;
  }
  return `${out};`;
}

/**
 * The four scripts, keyed per client and random draw (pgbench substitutes `:name`), on
 * the key table `keyTable` (a table variant's own), with `commit` for the verified
 * COMMIT's round trip (a commit variant's).
 */
export function baseScripts(
  keyTable: string = DEFAULT_TABLE,
  commitSql: (xid: string, store: string) => string = commitClaimSql,
): Record<ModeId, string> {
  const table = `${SCHEMA}.charges`;
  const insert = (key: string): string =>
    `INSERT INTO ${table} (customer_id, amount_cents, idem_key) VALUES ('${CHARGE.customerId}', ${CHARGE.amountCents}, ${key}) RETURNING id;`;
  const unique = `\\set k random(1, 1000000000000)`;
  // The default retention, as an endpoint writes it: the claim stores each row's expiry.
  const keys = new KeyStatements(
    { schema: SCHEMA, table: keyTable },
    undefined,
    DEFAULT_KEY_LIFETIME_MS,
  );
  const body = JSON.stringify({ id: '1', ...CHARGE });
  const claimOf = (key: string) => ({
    scope: 'bench',
    key,
    method: 'POST',
    route: '/eo',
    fingerprint: createHash('sha256').update(body).digest(),
  });
  const PLACEHOLDER = 'eo-bench-key';
  const claimSql = (key: string): string =>
    compound(keys.claimSql(claimOf(PLACEHOLDER), 5000)).replaceAll(PLACEHOLDER, key);
  const stored = keys.storeResponse(claimOf(PLACEHOLDER), {
    status: 201,
    headers: { 'content-type': 'application/json; charset=utf-8' },
    body: Buffer.from(body),
    bodyOmitted: null,
  });
  // The xid the claim read (its epilogue's `xid` column), kept by \aset for the check.
  const commit = compound(commitSql(':xid', stored)).replaceAll(PLACEHOLDER, 'c-:client_id-:k');
  const seed = `${SCHEMA}.seed_keys`;
  return {
    a: ['BEGIN;', insert('NULL'), 'COMMIT;'].join('\n'),
    b: [
      unique,
      'BEGIN;',
      `INSERT INTO ${seed} (key, request_hash) VALUES ('b-:client_id-:k', '${createHash('sha256').update(body).digest('hex')}') ON CONFLICT (key) DO NOTHING RETURNING key;`,
      insert(`'b-:client_id-:k'`),
      `UPDATE ${seed} SET status_code = 201, response = '${body}'::jsonb WHERE key = 'b-:client_id-:k';`,
      'COMMIT;',
    ].join('\n'),
    c: [unique, claimSql('c-:client_id-:k'), '\\aset', insert(`'c-:client_id-:k'`), commit].join(
      '\n',
    ),
    d: [`\\set k random(0, ${STORED_KEYS - 1})`, claimSql('stored-:k'), 'ROLLBACK;'].join('\n'),
  };
}

/** (c) and (d) through one variant. */
function variantScripts(variant: ClaimVariant): Record<'c' | 'd', string> {
  if (variant.table !== undefined) return baseScripts(variantTable(DEFAULT_TABLE, variant));
  if (variant.commit !== undefined) return baseScripts(DEFAULT_TABLE, variant.commit);
  const base = baseScripts();
  const { from, to } = claimVariantDdl(SCHEMA, DEFAULT_TABLE, variant);
  const swap = (mode: 'c' | 'd'): string => {
    const script = base[mode].replace(`${from}"(`, `${to}"(`);
    if (script === base[mode]) throw new Error(`(${mode}): no claim function call to swap`);
    return script;
  };
  return { c: swap('c'), d: swap('d') };
}

/** The four scripts, and (c) and (d) through each claim variant when `variants`. */
export function scripts(variants: boolean): Partial<Record<SqlMode, string>> {
  const base = baseScripts();
  if (!variants) return base;
  const all: Partial<Record<SqlMode, string>> = { ...base };
  for (const variant of CLAIM_VARIANTS) {
    const own = variantScripts(variant);
    all[`c@${variant.id}`] = base.c;
    all[`c:${variant.id}`] = own.c;
    all[`d@${variant.id}`] = base.d;
    all[`d:${variant.id}`] = own.d;
  }
  return all;
}

/** Every key table of the run: the shipped one, and each table variant's. */
export function keyTables(variants: boolean): string[] {
  return [
    DEFAULT_TABLE,
    ...(variants
      ? CLAIM_VARIANTS.filter((v) => v.table !== undefined).map((v) =>
          variantTable(DEFAULT_TABLE, v),
        )
      : []),
  ];
}
