import { ConfigurationError } from '../../errors.js';
import { validateKey } from '../../keys.js';
import { qualifiedTable } from '../../store/identifiers.js';
import {
  committedClaims,
  openWriters,
  probeClaim,
  type CommittedClaim,
  type InFlight,
} from '../../store/key-status.js';
import { listConsumers } from '../../store/table-stats.js';
import { flag, stringValue } from '../args.js';
import { EXIT, type Command } from '../command.js';
import { formatTable } from '../output.js';

/** How long `--probe`'s claim waits for a holder before calling the key held. */
const PROBE_WAIT_MS = 100;

/** `inspect`: is this key claimed, when, with which payload hash, and is a claim in flight. */
export const inspectCommand: Command = {
  name: 'inspect',
  summary: 'Show whether a key is claimed, when, with which payload hash',
  usage: '<key> [--consumer <name>] [--probe] [options]',
  description: [
    "Looks the key up in the dedup table: per consumer (every consumer, or --consumer's), whether a claim committed, its processed_at and the payload's sha256 (hex; none when the consumer runs with payloadHash: false). Exits 3 when there is no committed claim.",
    'A claim in progress (a handler still running) is an INSERT that has not committed, and an uncommitted row is invisible to every other session, so no read can see it. Read-only, inspect reports `no` only when no other transaction holds a write lock on the table (pg_locks), and otherwise `unknown`. --probe (with --consumer) answers for the key itself by attempting its claim in a transaction that always rolls back: it waits on a holder as a redelivery would (up to 100 ms), so `yes` means an open transaction holds it. The probe writes: it needs INSERT privilege, and a worker claiming that key in the same instant waits one round trip for its rollback.',
    'A key starting with "-" goes after "--": effectively-once inspect -- -key.',
  ].join('\n\n'),
  options: {
    consumer: {
      type: 'string',
      value: '<name>',
      description: "The consumer whose claim to look up (default: every consumer's)",
    },
    probe: {
      type: 'boolean',
      description: 'With --consumer: check for a claim in flight by attempting it (rolled back)',
    },
  },
  positionals: [{ name: 'key', description: 'The dedup key (message key)' }],
  examples: [
    'effectively-once inspect order-42 --consumer orders',
    'effectively-once inspect order-42 --consumer orders --probe --json',
  ],
  async run(ctx) {
    // A key no claim could have stored is bad input, not "not claimed".
    const key = validateKey(ctx.args.positionals[0], Number.MAX_SAFE_INTEGER);
    const consumer = stringValue(ctx.args, 'consumer');
    const probe = flag(ctx.args, 'probe');
    if (probe && consumer === undefined) {
      throw new ConfigurationError('--probe', 'needs --consumer: a claim belongs to one consumer');
    }
    const pool = await ctx.pool();
    const consumers = consumer === undefined ? await listConsumers(pool, ctx.ref) : [consumer];
    let claims = await committedClaims(pool, ctx.ref, key, consumers);
    let inFlight: InFlight | null = null;
    // With a committed claim every other delivery of the key is a duplicate at once;
    // there is nothing in flight to look for.
    if (consumer === undefined || claims.length === 0) {
      const writers = await openWriters(pool, ctx.ref);
      if (writers === 0) inFlight = { state: 'no', how: 'no-writers' };
      else if (probe && consumer !== undefined) {
        const probed = await probeClaim(pool, ctx.ref, consumer, key, PROBE_WAIT_MS);
        if (probed === 'committed') claims = await committedClaims(pool, ctx.ref, key, [consumer]);
        else inFlight = probed;
      } else inFlight = { state: 'unknown', how: 'writers', writers };
    }
    const table = qualifiedTable(ctx.ref);
    const scope = consumer === undefined ? 'any consumer' : `consumer "${consumer}"`;
    const lines =
      claims.length === 0
        ? [`Key ${JSON.stringify(key)}: no committed claim by ${scope} in ${table}.`]
        : [`Key ${JSON.stringify(key)} in ${table}:`, claimTable(claims)];
    if (inFlight !== null) lines.push(`In flight: ${describeInFlight(inFlight, consumer)}`);
    return {
      json: {
        key,
        consumer: consumer ?? null,
        schema: ctx.ref.schema,
        table: ctx.ref.table,
        claimed: claims.length > 0,
        claims: claims.map((c) => ({
          consumer: c.consumer,
          processedAt: c.processedAt.toISOString(),
          payloadHash: c.payloadHash,
        })),
        inFlight:
          inFlight === null ? null : { ...inFlight, detail: describeInFlight(inFlight, consumer) },
      },
      text: lines.join('\n'),
      exitCode: claims.length > 0 ? EXIT.ok : EXIT.notClaimed,
    };
  },
};

function claimTable(claims: readonly CommittedClaim[]): string {
  return formatTable(
    [{ header: 'consumer' }, { header: 'processed_at' }, { header: 'payload_hash (sha256)' }],
    claims.map((c) => [c.consumer, c.processedAt.toISOString(), c.payloadHash ?? '(none stored)']),
  );
}

function describeInFlight(inFlight: InFlight, consumer: string | undefined): string {
  switch (inFlight.how) {
    case 'no-writers':
      return 'no: no other transaction holds a write lock on the table, so none holds an uncommitted claim';
    case 'probe':
      return inFlight.state === 'yes'
        ? 'yes: an open transaction holds an uncommitted claim (or delete) of this key; the probe had to wait for it and rolled back'
        : 'no: the probe claimed the key at once (and rolled back), so no transaction holds it';
    case 'writers':
      return `unknown: ${inFlight.writers} other transaction(s) hold a write lock on the table, and an uncommitted claim is invisible to other sessions${consumer === undefined ? '; --consumer with --probe checks this key' : '; --probe checks this key'}`;
    case 'table-locked':
      return 'unknown: the table is locked (DDL running or waiting?); the probe did not wait for it';
  }
}
