import type { Pool } from 'pg';
import type { TableRef } from '../../store/identifiers.js';
import { openWriters, probeClaim, type InFlight } from '../key-status.js';

/** How long `--probe`'s claim waits for a holder before calling the key held. */
const PROBE_WAIT_MS = 100;

/**
 * Whether a claim of the key may be in flight, for a key with no committed row: `no`
 * when no transaction writes to the table at all; otherwise, with `probeRow`, what
 * attempting the claim (rolled back) finds, which is `committed` when a claim committed
 * meanwhile; otherwise `unknown`.
 */
export async function inFlightOf(
  pool: Pool,
  ref: TableRef,
  probeRow: Record<string, unknown> | undefined,
): Promise<InFlight | 'committed'> {
  const writers = await openWriters(pool, ref);
  if (writers === 0) return { state: 'no', how: 'no-writers' };
  if (probeRow !== undefined) return probeClaim(pool, ref, probeRow, PROBE_WAIT_MS);
  return { state: 'unknown', how: 'writers', writers };
}

/** One sentence on `inFlight`; `probeHint` says how to learn more when it is `unknown`. */
export function describeInFlight(inFlight: InFlight, probeHint: string): string {
  switch (inFlight.how) {
    case 'no-writers':
      return 'no: no other transaction holds a write lock on the table, so none holds an uncommitted claim';
    case 'probe':
      return inFlight.state === 'yes'
        ? 'yes: an open transaction holds an uncommitted claim (or delete) of this key; the probe had to wait for it and rolled back'
        : 'no: the probe claimed the key at once (and rolled back), so no transaction holds it';
    case 'writers':
      return `unknown: ${inFlight.writers} other transaction(s) hold a write lock on the table, and an uncommitted claim is invisible to other sessions; ${probeHint}`;
    case 'table-locked':
      return 'unknown: the table is locked (DDL running or waiting?); the probe did not wait for it';
  }
}
