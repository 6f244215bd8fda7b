import { ConfigurationError } from '../../errors.js';
import { validateKey } from '../../keys.js';
import { qualifiedTable } from '../../store/identifiers.js';
import { committedClaims, type CommittedClaim, type InFlight } from '../key-status.js';
import { listGroups } from '../../store/table-stats.js';
import { flag } from '../args.js';
import { EXIT, type Command, type CommandContext, type CommandOutput } from '../command.js';
import { FAMILY_OPTIONS, selectFamily, type SelectedFamily } from '../families.js';
import { formatTable } from '../output.js';
import { describeInFlight, inFlightOf } from './in-flight.js';
import { inspectFlowKey } from './inspect-flow.js';
import { inspectHttpKey } from './inspect-http.js';

/** `inspect`: is this key claimed, when, with what (payload hash, stored answer), is a claim in flight. */
export const inspectCommand: Command = {
  name: 'inspect',
  summary: 'Show whether a key is claimed, when, with which payload hash or stored answer',
  usage:
    '<key> [--consumer <name> | --family http-keys --scope <scope> [--body] | --family flows --scope <scope>] [--probe] [options]',
  description: [
    "Looks the key up in the dedup table: per consumer (every consumer, or --consumer's), whether a claim committed, its processed_at and the payload's sha256 (hex; none when the consumer runs with payloadHash: false). Exits 3 when there is no committed claim.",
    "With --family http-keys it looks the key up in the HTTP key table, in the one scope (tenant) --scope names, which is required: what was answered and when (created_at, method, route, the request's fingerprint, the stored status and headers, the body's size, or why no body was stored). The body itself only with --body.",
    'A claim in progress (a handler still running) is an INSERT that has not committed, and an uncommitted row is invisible to every other session, so no read can see it. Read-only, inspect reports `no` only when no other transaction holds a write lock on the table (pg_locks), and otherwise `unknown`. --probe (with --consumer, or with --family http-keys) answers for the key itself by attempting its claim in a transaction that always rolls back: it waits on a holder as a redelivery or a retry would (up to 100 ms), so `yes` means an open transaction holds it. The probe writes: it needs INSERT privilege, and a worker claiming that key in the same instant waits one round trip for its rollback.',
    "With --family flows it shows one flow of steps (the steps flows table, eo_flows) in the one scope --scope names, which is required: its state (finished, running under a live lease, or resumable by a retry or the completer), its attempts (the owner's fence), each recorded step with its kind and the size of its result, the stored answer's status, and why its last run stopped (last_error).",
    'A key starting with "-" goes after "--": effectively-once inspect -- -key.',
  ].join('\n\n'),
  options: {
    ...FAMILY_OPTIONS,
    consumer: {
      type: 'string',
      value: '<name>',
      description: "The consumer whose claim to look up (default: every consumer's)",
    },
    scope: {
      type: 'string',
      value: '<scope>',
      description:
        'With --family http-keys or flows, required: the scope (tenant) the key belongs to',
    },
    body: {
      type: 'boolean',
      description: 'With --family http-keys: also print the stored response body',
    },
    probe: {
      type: 'boolean',
      description:
        'With --consumer or --scope: check for a claim in flight by attempting it (rolled back)',
    },
  },
  positionals: [{ name: 'key', description: 'The dedup key (message key) or Idempotency-Key' }],
  examples: [
    'effectively-once inspect order-42 --consumer orders',
    'effectively-once inspect order-42 --consumer orders --probe --json',
    'effectively-once inspect 8e03978e-40d5-43e8-bc93-6894a57f9324 --family http-keys --scope acme --body',
    'effectively-once inspect 8e03978e-40d5-43e8-bc93-6894a57f9324 --family flows --scope acme',
  ],
  async run(ctx) {
    const selected = selectFamily('inspect', ctx.args, ctx.ref);
    if (selected.entry.family.name === 'flows') {
      if (flag(ctx.args, 'body') || flag(ctx.args, 'probe'))
        throw new ConfigurationError(
          flag(ctx.args, 'body') ? '--body' : '--probe',
          'is not for --family flows (a flow row is committed as soon as it is claimed)',
        );
      return inspectFlowKey(ctx, selected);
    }
    if (selected.rows.group === 'scope') return inspectHttpKey(ctx, selected);
    if (flag(ctx.args, 'body'))
      throw new ConfigurationError('--body', 'is for --family http-keys (a stored response body)');
    return inspectDedupKey(ctx, selected);
  },
};

async function inspectDedupKey(
  ctx: CommandContext,
  { ref, rows, group: consumer }: SelectedFamily,
): Promise<CommandOutput> {
  // A key no claim could have stored is bad input, not "not claimed".
  const key = validateKey(ctx.args.positionals[0], Number.MAX_SAFE_INTEGER);
  const probe = flag(ctx.args, 'probe');
  if (probe && consumer === undefined) {
    throw new ConfigurationError('--probe', 'needs --consumer: a claim belongs to one consumer');
  }
  const pool = await ctx.pool();
  const consumers =
    consumer === undefined ? await listGroups(pool, rows.target(ref, undefined)) : [consumer];
  let claims = await committedClaims(pool, ref, key, consumers);
  let inFlight: InFlight | null = null;
  // With a committed claim every other delivery of the key is a duplicate at once;
  // there is nothing in flight to look for.
  if (consumer === undefined || claims.length === 0) {
    const probeRow = probe && consumer !== undefined ? rows.probeRow(consumer, key) : undefined;
    const found = await inFlightOf(pool, ref, probeRow);
    if (found === 'committed' && consumer !== undefined)
      claims = await committedClaims(pool, ref, key, [consumer]);
    else if (found !== 'committed') inFlight = found;
  }
  const hint =
    consumer === undefined ? '--consumer with --probe checks this key' : '--probe checks this key';
  const table = qualifiedTable(ref);
  const scope = consumer === undefined ? 'any consumer' : `consumer "${consumer}"`;
  const lines =
    claims.length === 0
      ? [`Key ${JSON.stringify(key)}: no committed claim by ${scope} in ${table}.`]
      : [`Key ${JSON.stringify(key)} in ${table}:`, claimTable(claims)];
  if (inFlight !== null) lines.push(`In flight: ${describeInFlight(inFlight, hint)}`);
  return {
    json: {
      key,
      consumer: consumer ?? null,
      family: 'consumer',
      schema: ref.schema,
      table: ref.table,
      claimed: claims.length > 0,
      claims: claims.map((c) => ({
        consumer: c.consumer,
        processedAt: c.processedAt.toISOString(),
        payloadHash: c.payloadHash,
      })),
      inFlight:
        inFlight === null ? null : { ...inFlight, detail: describeInFlight(inFlight, hint) },
    },
    text: lines.join('\n'),
    exitCode: claims.length > 0 ? EXIT.ok : EXIT.notClaimed,
  };
}

function claimTable(claims: readonly CommittedClaim[]): string {
  return formatTable(
    [{ header: 'consumer' }, { header: 'processed_at' }, { header: 'payload_hash (sha256)' }],
    claims.map((c) => [c.consumer, c.processedAt.toISOString(), c.payloadHash ?? '(none stored)']),
  );
}
