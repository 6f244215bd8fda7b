import { ConfigurationError } from '../../errors.js';
import { validateKey } from '../../keys.js';
import { qualifiedTable, type TableRef } from '../../store/identifiers.js';
import type { Pool } from 'pg';
import { EXIT, type CommandContext, type CommandOutput } from '../command.js';
import type { SelectedFamily } from '../families.js';
import { formatFields, formatTable, formatTime, isoOrNull } from '../output.js';

/** A flow's row as inspect shows it. */
interface FlowView {
  flow: string;
  version: string | null;
  origin: string;
  /** The owner's fence: the number of runs (attempts) the flow has had. */
  fence: number;
  state: 'finished' | 'running' | 'resumable';
  leaseUntil: Date | null;
  steps: Array<{ position: number; name: string; kind: string; resultBytes: number | null }>;
  status: number | null;
  lastError: {
    code: string;
    message: string;
    step: string | null;
    fence: number;
    at: string;
  } | null;
  createdAt: Date;
  updatedAt: Date;
  finishedAt: Date | null;
}

interface RawFlow {
  flow: string;
  version: string | null;
  origin: string;
  fence: string;
  live: boolean;
  lease_until: Date | null;
  steps: Array<{ name: string; kind: string; result: string | null }>;
  status: number | null;
  last_error: FlowView['lastError'];
  created_at: Date;
  updated_at: Date;
  finished_at: Date | null;
}

/**
 * `inspect --family flows`: one flow of one scope — its state (finished, running under a
 * live lease, or resumable by a retry or the completer), its attempts (the owner's
 * fence), its recorded steps in order, the stored answer's status, and why its last run
 * stopped. Results are not printed (they may hold what the provider answered), only
 * their size.
 */
export async function inspectFlowKey(
  ctx: CommandContext,
  { ref, group: scope }: SelectedFamily,
): Promise<CommandOutput> {
  if (scope === undefined)
    throw new ConfigurationError(
      '--scope',
      'is required with --family flows: a flow key belongs to one scope (`stats --family flows` lists them)',
    );
  const key = validateKey(ctx.args.positionals[0], Number.MAX_SAFE_INTEGER);
  const view = await readFlow(await ctx.pool(), ref, scope, key);
  const where = `scope ${JSON.stringify(scope)} in ${qualifiedTable(ref)}`;
  return {
    json: {
      family: 'flows',
      key,
      scope,
      schema: ref.schema,
      table: ref.table,
      found: view !== null,
      flow:
        view === null
          ? null
          : {
              ...view,
              leaseUntil: isoOrNull(view.leaseUntil),
              createdAt: view.createdAt.toISOString(),
              updatedAt: view.updatedAt.toISOString(),
              finishedAt: isoOrNull(view.finishedAt),
            },
    },
    text:
      view === null
        ? `Key ${JSON.stringify(key)}: no flow in ${where}.`
        : [`Flow key ${JSON.stringify(key)} of ${where}:`, ...flowText(view)].join('\n'),
    exitCode: view === null ? EXIT.notClaimed : EXIT.ok,
  };
}

async function readFlow(
  pool: Pool,
  ref: TableRef,
  scope: string,
  key: string,
): Promise<FlowView | null> {
  const { rows } = await pool.query<RawFlow>(
    `SELECT flow, version, origin, fence::text AS fence, coalesce(lease_until > now(), false) AS live,
            lease_until, steps, status, last_error, created_at, updated_at, finished_at
     FROM ${qualifiedTable(ref)} WHERE scope = $1 AND flow_key = $2`,
    [scope, key],
  );
  const raw = rows[0];
  if (raw === undefined) return null;
  return {
    flow: raw.flow,
    version: raw.version,
    origin: raw.origin,
    fence: Number(raw.fence),
    state: raw.status !== null ? 'finished' : raw.live ? 'running' : 'resumable',
    leaseUntil: raw.lease_until,
    steps: raw.steps.map((s, position) => ({
      position,
      name: s.name,
      kind: s.kind,
      resultBytes: s.result === null ? null : Buffer.byteLength(s.result, 'utf8'),
    })),
    status: raw.status,
    lastError: raw.last_error,
    createdAt: raw.created_at,
    updatedAt: raw.updated_at,
    finishedAt: raw.finished_at,
  };
}

const STATES: Record<FlowView['state'], string> = {
  finished: 'finished (its answer is stored; every retry replays it)',
  running: 'running (an owner holds a live lease)',
  resumable: 'unfinished, lease expired: a retry or the completer resumes it',
};

function flowText(view: FlowView): string[] {
  const lines = [
    formatFields([
      ['flow', view.version === null ? view.flow : `${view.flow} (version ${view.version})`],
      ['origin', view.origin === '' ? '-' : view.origin],
      ['state', STATES[view.state]],
      ['attempts', `${view.fence} (the owner's fence: one more at every takeover)`],
      ['lease_until', formatTime(view.leaseUntil)],
      ['status', view.status === null ? '-' : String(view.status)],
      ['created_at', formatTime(view.createdAt)],
      ['updated_at', formatTime(view.updatedAt)],
      ['finished_at', formatTime(view.finishedAt)],
      [
        'last_error',
        view.lastError === null
          ? '-'
          : `${view.lastError.code}${view.lastError.step === null ? '' : ` at step ${JSON.stringify(view.lastError.step)}`} (attempt ${view.lastError.fence}, ${view.lastError.at}): ${view.lastError.message}`,
      ],
    ]),
    '',
  ];
  if (view.steps.length === 0) lines.push('Recorded steps: none');
  else
    lines.push(
      'Recorded steps:',
      formatTable(
        [
          { header: '#', align: 'right' },
          { header: 'step' },
          { header: 'kind' },
          { header: 'result' },
        ],
        view.steps.map((s) => [
          String(s.position),
          s.name,
          s.kind,
          s.resultBytes === null ? '(none)' : `${s.resultBytes} bytes`,
        ]),
      ),
    );
  return lines;
}
