/** The flows table: one row per flow key, its recorded input, steps, lease, fence and answer. */
import {
  derivedName,
  qualifiedTable,
  quoteIdentifier,
  type TableRef,
} from '../store/identifiers.js';
import { keyTableStatements } from '../store/migrate.js';
import { keyedPruneTarget, type PruneTarget } from '../store/prune.js';
import type { TableFamily } from '../store/table-family.js';

/** Table name unless configured otherwise. */
export const DEFAULT_FLOWS_TABLE = 'eo_flows';

// A table of its own, not columns on the HTTP key table: a key row there exists only
// while or after the transaction that claimed it commits ("in progress" is a held lock,
// never a stored flag), and every version of the request door reads a committed row
// without a response as broken. A flow needs exactly that stored in-progress state
// (committed steps, a lease) across many transactions; on its own table neither door
// changes meaning during a rolling deploy, and both doors (HTTP, consumer) share it.
//
// - `input`, `body`: json, not jsonb, so the recorded text is replayed exactly as the
//   first run's JSON round trip produced it (jsonb reorders keys).
// - `steps`: a jsonb array of {name, kind, result}, `result` the exact JSON text as a
//   string; its length is the next step's position, checked by every write.
// - `fence`: the owner's token, one more at each takeover; every write checks it.
// - `lease_until`: the owner's lease; NULL once answered.
// - `status`, `headers`, `body`: the final answer, NULL until stored.
// - `last_error` (version 2): {code, message, step, at} of the last run that stopped at
//   a recovery point, for `effectively-once inspect --family flows`; kept once answered.
const COLUMNS = `  scope        text        NOT NULL,
  flow_key     text        NOT NULL,
  flow         text        NOT NULL,
  version      text,
  origin       text        NOT NULL,
  fingerprint  bytea       NOT NULL,
  input        json,
  steps        jsonb       NOT NULL DEFAULT '[]'::jsonb,
  fence        bigint      NOT NULL DEFAULT 1,
  lease_until  timestamptz,
  status       smallint,
  headers      jsonb,
  body         json,
  created_at   timestamptz NOT NULL DEFAULT now(),
  updated_at   timestamptz NOT NULL DEFAULT now(),
  finished_at  timestamptz,
  expires_at   timestamptz,
  PRIMARY KEY (scope, flow_key)`;

/** The flows table family (`eo_flows`). */
export const flowTables: TableFamily = {
  name: 'flows',
  summary: 'the steps flows table (one row per flow key: input, recorded steps, lease, answer)',
  defaultTable: DEFAULT_FLOWS_TABLE,
  steps: (ref: TableRef) => [
    {
      version: 1,
      summary: 'the flows table, its created_at and expiry indexes, the unfinished-lease index',
      statements: [
        ...keyTableStatements({ ref, columns: COLUMNS, timeColumn: 'created_at' }),
        // The completer's scan: unfinished flows by lease expiry.
        `CREATE INDEX IF NOT EXISTS ${quoteIdentifier(derivedName(ref.table, '_unfinished_idx'), 'table')} ON ${qualifiedTable(ref)} (lease_until) WHERE status IS NULL`,
      ],
    },
    {
      version: 2,
      summary: 'the last_error column (why the last run stopped at a recovery point)',
      // Nullable, no default: adding it rewrites nothing, and a version-1 runner (which
      // never writes it) keeps working beside a version-2 one during a rolling deploy.
      statements: [
        `ALTER TABLE ${qualifiedTable(ref)} ADD COLUMN IF NOT EXISTS "last_error" jsonb`,
      ],
    },
  ],
};

/**
 * The flows a prune deletes (`effectively-once prune --family flows`): finished ones
 * only, aged by when their answer was stored. An unfinished flow (finished_at NULL) is
 * never deleted, whatever the window: its client or the completer may still resume it.
 * No flow writes `expires_at`, so only a window (`--older-than`) deletes any.
 */
export function flowPruneTarget(ref: TableRef, scope: string | undefined): PruneTarget {
  return keyedPruneTarget(ref, { group: 'scope', key: 'flow_key', time: 'finished_at' }, scope);
}
