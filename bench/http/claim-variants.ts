/**
 * Variants of the key table for `npm run bench -- --http-sql --claim-variants`: each is
 * the library's own DDL (what `migrate` runs) or round trip changed in one way, so the
 * pgbench run measures what that one change would buy (or cost) against the shipped
 * table in the same rounds. A function variant (`rewrite`) is the claim function created
 * beside the shipped one under another name; a table variant (`table`) is the whole DDL
 * (table, index, functions) under the table name `<table>_<id>`, rewritten; a commit
 * variant (`commit`) replaces the verified COMMIT's round trip. Nothing here is used by
 * the library.
 */
import { idempotencyKeyTables } from '../../src/http/store.js';
import { tableRef } from '../../src/store/identifiers.js';

export interface ClaimVariant {
  /** Short name; the function is created as `<table>_claim_<id with _>`. */
  id: string;
  /** What the change is, for the report. */
  summary: string;
  /** The claim function's PL/pgSQL body, changed. */
  rewrite?: (body: string) => string;
  /** Each DDL statement of a table of its own (`<table>_<id>`), changed. */
  table?: (statement: string) => string;
  /** The round trip after the effect, in place of `commitClaimSql(xid, store)`. */
  commit?: (xid: string, store: string) => string;
}

/** The table a table variant gets: the shipped name with the variant's id. */
export function variantTable(table: string, variant: ClaimVariant): string {
  return `${table}_${variant.id.replaceAll('-', '_')}`;
}

/** One DDL statement changed by `edit`, which must change it when `when` matches. */
function edit(statement: string, when: RegExp, change: (s: string) => string): string {
  if (!when.test(statement)) return statement;
  const changed = change(statement);
  if (changed === statement)
    throw new Error(`claim variants: no change to ${statement.slice(0, 60)}`);
  return changed;
}

/** The statement that reads a stored row back (the body has exactly one). */
function storedRowRead(body: string): string {
  const read = /RETURN QUERY SELECT NULL::text, k\.method[^;]*;/.exec(body)?.[0];
  if (read === undefined) throw new Error('claim variants: no stored-row read in the claim');
  return read;
}

export const CLAIM_VARIANTS: ClaimVariant[] = [
  {
    id: 'read-first',
    summary:
      'reads the stored row before the INSERT and returns it when found (a replay skips ' +
      'the INSERT and the lock_timeout switch; a first execution pays one more index probe)',
    rewrite: (body) => {
      const begin = body.indexOf('\nBEGIN\n');
      if (begin < 0) throw new Error('claim variants: no BEGIN in the claim');
      const at = begin + '\nBEGIN\n'.length;
      const early = `  ${storedRowRead(body)}\n  IF FOUND THEN RETURN; END IF;\n`;
      return body.slice(0, at) + early + body.slice(at);
    },
  },
  {
    id: 'assign',
    summary:
      'the same steps without PERFORM or RETURN QUERY of constants: set_config as an ' +
      'assignment and the answer row as OUT values with RETURN NEXT (PL/pgSQL evaluates ' +
      'those itself, where PERFORM and RETURN QUERY start the executor)',
    rewrite: (body) => {
      const none = /RETURN QUERY SELECT NULL::text, NULL::text[^;]*;/.exec(body)?.[0];
      const xid = /RETURN QUERY SELECT pg_current_xact_id_if_assigned\(\)::text[^;]*;/.exec(
        body,
      )?.[0];
      if (none === undefined || xid === undefined || !body.includes('PERFORM set_config('))
        throw new Error('claim variants: the claim is not shaped as expected');
      return body
        .replace('DECLARE\n', 'DECLARE\n  ignored text;\n')
        .replaceAll('PERFORM set_config(', 'ignored := set_config(')
        .replace(xid, 'xid := pg_current_xact_id_if_assigned()::text;\n    RETURN NEXT;')
        .replace(none, 'RETURN NEXT;');
    },
  },
  {
    id: 'no-lock-timeout',
    summary:
      'drops the lock_timeout switch around the INSERT (not shippable: a retry would wait ' +
      'on the original without bound; measures what the switch costs)',
    rewrite: (body) => {
      const kept = body.split('\n').filter((line) => !line.includes("set_config('lock_timeout'"));
      if (kept.length === body.split('\n').length)
        throw new Error('claim variants: no lock_timeout switch in the claim');
      return kept.join('\n');
    },
  },
  {
    id: 'brin',
    summary:
      'a BRIN index on created_at instead of the B-tree (pruning reads page ranges; an ' +
      'insert touches a BRIN only when its range is summarized)',
    table: (statement) =>
      edit(statement, /^CREATE INDEX.*\("?created_at"?\)/, (s) =>
        s.replace(/ ON (\S+) \(/, ' ON $1 USING brin ('),
      ),
  },
  {
    id: 'no-time-index',
    summary:
      'no index on created_at (pruning would go by another route: the primary key, or ' +
      'time-bucketed partitions dropped whole)',
    table: (statement) =>
      /^CREATE INDEX.*\("?created_at"?\)/.test(statement) ? 'SELECT 1' : statement,
  },
  {
    id: 'no-request-columns',
    summary:
      'method, route, fingerprint neither stored nor passed (prices the columns: a ' +
      'mismatched retry could no longer be told from a replay)',
    table: (statement) =>
      edit(
        edit(statement, /^CREATE TABLE/, (s) =>
          s
            .replace(/(method\s+text\s+)NOT NULL/, '$1')
            .replace(/(route\s+text\s+)NOT NULL/, '$1')
            .replace(/(fingerprint\s+bytea\s+)NOT NULL/, '$1'),
        ),
        /_claim_v\d+"?\(p_scope/,
        (s) =>
          s
            .replace(
              '(scope, idempotency_key, method, route, fingerprint, expires_at)',
              '(scope, idempotency_key, expires_at)',
            )
            .replace('(p_scope, p_key, p_method, p_route, p_fingerprint,', '(p_scope, p_key,'),
      ),
  },
  {
    id: 'plain-commit',
    summary:
      "COMMIT without the check that the claim's transaction still runs (not shippable: " +
      'prices the verified COMMIT)',
    commit: (_xid, store) => `${store}; COMMIT;`,
  },
];

/** A table variant's DDL: the shipped DDL for `<table>_<id>`, each statement changed. */
export function tableVariantDdl(schema: string, table: string, variant: ClaimVariant): string[] {
  if (variant.table === undefined) throw new Error(`claim variants: ${variant.id} has no table`);
  const ddl = idempotencyKeyTables
    .steps(tableRef({ schema, table: variantTable(table, variant) }))
    .flatMap((step) => step.statements);
  return ddl.map(variant.table);
}

/** `CREATE FUNCTION` for `variant` beside the table's claim function, and the new name. */
export function claimVariantDdl(
  schema: string,
  table: string,
  variant: ClaimVariant,
): { sql: string; from: string; to: string } {
  if (variant.rewrite === undefined)
    throw new Error(`claim variants: ${variant.id} has no rewrite`);
  const statements = idempotencyKeyTables
    .steps(tableRef({ schema, table }))
    .flatMap((step) => step.statements);
  const statement = statements.find((s) => /_claim_v\d+"?\(p_scope/.test(s));
  if (statement === undefined) throw new Error('claim variants: no claim function in the DDL');
  const from = /_claim_v\d+/.exec(statement)?.[0] ?? '_claim_v';
  const to = `_claim_${variant.id.replaceAll('-', '_')}`;
  // The body is everything between the first dollar-quote tag and its closing twin.
  const tag = /AS (\$[^$]*\$)/.exec(statement)?.[1];
  if (tag === undefined) throw new Error('claim variants: the claim has no quoted body');
  const start = statement.indexOf(tag) + tag.length;
  const end = statement.lastIndexOf(tag);
  const body = statement.slice(start, end);
  const head = statement.slice(0, start);
  const renamed = head.replace(/_claim_v\d+("?)\(p_scope/, `${to}$1(p_scope`);
  if (renamed === head)
    throw new Error('claim variants: the claim function is not named as expected');
  return { sql: `${renamed}${variant.rewrite(body)}${statement.slice(end)}`, from, to };
}
