/** Runs flows on one flows table: claim or take over, replay, run the rest, store the answer. */
import { createHash } from 'node:crypto';
import { inspect } from 'node:util';
import {
  ClaimBusyError,
  ConfigurationError,
  DatabaseError,
  EffectivelyOnceError,
} from '../errors.js';
import { checkStoredScope } from '../http/options.js';
import { validateKey } from '../keys.js';
import { silentLogger } from '../logger.js';
import { MAX_KEY_LENGTH } from '../shared-options.js';
import { sleep } from '../sleep.js';
import { tableRef } from '../store/identifiers.js';
import { applyMigrations, checkMigratedAtStart } from '../store/migrator.js';
import { FlowFencedError, FlowKeyReusedError, FlowStepsChangedError } from './errors.js';
import { FlowDrive, type RunnerSettings } from './drive.js';
import { FlowStore, type FlowIdentity, type FlowRow } from './store.js';
import { DEFAULT_FLOWS_TABLE, flowTables } from './table.js';
import type { StepsTelemetry } from './telemetry.js';
import type { Flow, FlowOutcome, FlowRunner, FlowStart, FlowStoreOptions } from './types.js';

/** Default owner lease. */
export const DEFAULT_LEASE_MS = 30_000;
/** How long a connection may take to come out of the pool. */
const ACQUIRE_TIMEOUT_MS = 10_000;
/** Retry-After of a flow stopped at a recovery point. */
const RETRY_AFTER_MS = 1_000;
/** Longest pause between two looks at a key a live owner holds. */
const POLL_MS = 100;

/**
 * A runner of flows on one flows table (default `public.eo_flows`). The doors make
 * their own; use one directly to drive a flow from anything else (a job, a script):
 * `await runner.run(flow, { scope, key, input })`.
 */
export function createFlowRunner(options: FlowStoreOptions): FlowRunner {
  return new Runner(options);
}

/** The runner; the completer also resumes keys by their row alone (`resume`). */
export class Runner implements FlowRunner {
  private readonly store: FlowStore;
  private readonly settings: RunnerSettings;
  private ready: Promise<void> | undefined;

  constructor(readonly options: FlowStoreOptions) {
    if (typeof options?.pool?.query !== 'function')
      throw new ConfigurationError('pool', 'must be a pg Pool');
    const leaseMs = options.leaseMs ?? DEFAULT_LEASE_MS;
    if (!Number.isFinite(leaseMs) || leaseMs < 10)
      throw new ConfigurationError('leaseMs', 'must be a number of ms, at least 10');
    if (
      options.telemetry !== undefined &&
      typeof (options.telemetry as Partial<StepsTelemetry> | null)?.startStep !== 'function'
    )
      throw new ConfigurationError('telemetry', 'must be a StepsTelemetry (startStep)');
    this.settings = {
      leaseMs,
      logger: options.logger ?? silentLogger,
      telemetry: options.telemetry,
    };
    const ref = tableRef({ schema: options.schema, table: options.table ?? DEFAULT_FLOWS_TABLE });
    flowTables.steps(ref); // validates the names now, not at the first request
    this.store = new FlowStore(options.pool, ref, leaseMs, ACQUIRE_TIMEOUT_MS);
  }

  async migrate(): Promise<void> {
    await applyMigrations(
      this.options.pool,
      flowTables,
      tableRef({ schema: this.options.schema, table: this.options.table ?? DEFAULT_FLOWS_TABLE }),
    );
  }

  async run<I>(flow: Flow<I>, start: FlowStart<I>): Promise<FlowOutcome> {
    try {
      // Checked as every door checks them: a lone surrogate would reach Postgres as
      // U+FFFD (two keys one row), a NUL would fail every attempt as a database error.
      validateKey(start?.key, MAX_KEY_LENGTH);
      checkStoredScope(start.scope);
      await this.prepare();
      return await this.claimAndDrive(flow, start);
    } catch (error) {
      return this.failedRun(error);
    }
  }

  /**
   * Takes over an abandoned key (unfinished, lease expired) with its recorded input,
   * origin and fingerprint, and drives it to its answer: the completer's way in. Undefined
   * when there was nothing to take over (finished, live, or gone meanwhile).
   */
  async resume(
    flow: Flow<unknown>,
    scope: string,
    key: string,
    signal: AbortSignal,
  ): Promise<FlowOutcome | undefined> {
    try {
      await this.prepare();
      const row = await this.store.read(scope, key);
      if (row === undefined || row.answer !== undefined || row.live || row.flow !== flow.name)
        return undefined;
      if ((row.version ?? undefined) !== flow.version)
        return {
          kind: 'refused',
          error: new FlowStepsChangedError(flow.name, key, 'recorded under another version', {
            recorded: row.version ?? '(none)',
            requested: flow.version ?? '(none)',
          }),
        };
      const id: FlowIdentity = {
        scope,
        key,
        flow: flow.name,
        version: flow.version,
        origin: row.origin,
        fingerprint: row.fingerprint,
      };
      const taken = await this.store.takeOver(id);
      if (taken === undefined) return undefined;
      return await this.drive(
        flow,
        id,
        { scope, key, input: undefined, signal },
        { fence: taken.fence, steps: taken.steps, input: taken.input, resumed: true },
      );
    } catch (error) {
      return this.failedRun(error);
    }
  }

  /** Unfinished keys of `names` whose lease expired. */
  async abandoned(names: readonly string[], limit: number): ReturnType<FlowStore['abandoned']> {
    // Migrated (or checked) first, as run and resume do: a job's runOnce on a fresh
    // database finds nothing instead of "relation … does not exist".
    await this.prepare();
    return this.store.abandoned(names, limit);
  }

  private failedRun(error: unknown): FlowOutcome {
    if (error instanceof EffectivelyOnceError && error.retryable)
      return { kind: 'retry', error, retryAfterMs: RETRY_AFTER_MS };
    if (error instanceof EffectivelyOnceError) return { kind: 'refused', error };
    return { kind: 'retry', error: new DatabaseError('flow', error), retryAfterMs: RETRY_AFTER_MS };
  }

  private prepare(): Promise<void> {
    this.ready ??= (async () => {
      const ref = tableRef({
        schema: this.options.schema,
        table: this.options.table ?? DEFAULT_FLOWS_TABLE,
      });
      if (this.options.migrate === false)
        await checkMigratedAtStart(this.options.pool, flowTables, ref, {
          timeoutMs: ACQUIRE_TIMEOUT_MS,
          logger: this.settings.logger,
        });
      else await this.migrate();
    })().catch((error: unknown) => {
      this.ready = undefined;
      throw error;
    });
    return this.ready;
  }

  /**
   * Claims the key, or takes it over once its lease expired, or waits (bounded) for a
   * live owner; answers a stored answer as a replay; refuses another request's key.
   */
  private async claimAndDrive<I>(flow: Flow<I>, start: FlowStart<I>): Promise<FlowOutcome> {
    const input = inputText(start.input);
    const id: FlowIdentity = {
      scope: start.scope,
      key: start.key,
      flow: flow.name,
      version: flow.version,
      origin: start.origin ?? '',
      fingerprint: start.fingerprint ?? sha256(input ?? ''),
    };
    const waitMs = start.waitMs ?? 0;
    const deadline = Date.now() + waitMs;
    for (let vanished = 0; ;) {
      if (await this.store.insert(id, input))
        return this.drive(flow, id, start, { fence: 1, steps: [], input, resumed: false });
      const row = await this.store.read(id.scope, id.key);
      if (row === undefined) {
        // Pruned between the insert and the read: claim again (bounded).
        if (++vanished > 3)
          throw new DatabaseError('flow claim', new Error('the flow row kept vanishing'));
        continue;
      }
      const refused = mismatch(id, row);
      if (refused !== undefined) return { kind: 'refused', error: refused };
      if (row.answer !== undefined)
        return { kind: 'answered', answer: row.answer, replayed: true, resumed: false };
      if ((row.version ?? undefined) !== flow.version)
        return {
          kind: 'refused',
          error: new FlowStepsChangedError(flow.name, id.key, 'recorded under another version', {
            recorded: row.version ?? '(none)',
            requested: flow.version ?? '(none)',
          }),
        };
      if (!row.live) {
        const taken = await this.store.takeOver(id);
        if (taken !== undefined)
          return this.drive(flow, id, start, {
            fence: taken.fence,
            steps: taken.steps,
            input: taken.input,
            resumed: true,
          });
        continue; // someone else took it, or it finished: look again
      }
      const left = deadline - Date.now();
      if (left <= 0 || start.signal?.aborted === true)
        return { kind: 'busy', error: new ClaimBusyError(id.key, waitMs) };
      await sleep(Math.max(1, Math.min(POLL_MS, left, row.remainingMs + 1)), start.signal);
    }
  }

  /** Runs the flow's function as the key's owner, then settles how it ended. */
  private async drive<I>(
    flow: Flow<I>,
    id: FlowIdentity,
    start: FlowStart<I>,
    claim: Pick<FlowRow, 'fence' | 'steps' | 'input'> & { resumed: boolean },
  ): Promise<FlowOutcome> {
    const drive = new FlowDrive(this.store, this.settings, flow, id, claim, start.signal);
    const ended = await drive.run(
      claim.input === null ? (undefined as I) : (JSON.parse(claim.input) as I),
    );
    if (ended.kind === 'answered')
      return { kind: 'answered', answer: ended.answer, replayed: false, resumed: claim.resumed };
    const error = ended.error;
    // Released on every stop, a fenced one too: the UPDATE names this owner's fence, so
    // it ends only a lease this owner still holds (a false fence, a late heartbeat's)
    // and a retry need not wait it out; a real successor's lease is left alone.
    await this.store
      .release(drive.mark, {
        code: error.code,
        message: withCause(error),
        ...(typeof error.details['step'] === 'string' ? { step: error.details['step'] } : {}),
      })
      .catch((err: unknown) =>
        this.settings.logger.warn(
          { err, key: id.key },
          'effectively-once: releasing a flow lease failed',
        ),
      );
    if (error instanceof FlowFencedError) {
      // Another owner took over: its answer, if it stored one already; else later.
      const row = await this.store.read(id.scope, id.key).catch(() => undefined);
      if (row?.answer !== undefined)
        return { kind: 'answered', answer: row.answer, replayed: true, resumed: claim.resumed };
      return { kind: 'retry', error, retryAfterMs: RETRY_AFTER_MS };
    }
    if (error.retryable) return { kind: 'retry', error, retryAfterMs: RETRY_AFTER_MS };
    return { kind: 'refused', error };
  }
}

/** Why a key's row is not this request's, if it is not. */
function mismatch(id: FlowIdentity, row: FlowRow): FlowKeyReusedError | undefined {
  if (row.flow !== id.flow) return new FlowKeyReusedError(id.key, 'flow');
  if (row.origin !== id.origin) return new FlowKeyReusedError(id.key, 'origin');
  if (!row.fingerprint.equals(id.fingerprint)) return new FlowKeyReusedError(id.key, 'input');
  return undefined;
}

/** The input's JSON text as recorded (null: undefined); a value JSON cannot hold is refused. */
function inputText(input: unknown): string | null {
  if (input === undefined) return null;
  let text: string | undefined;
  try {
    text = JSON.stringify(input);
  } catch (cause) {
    throw new ConfigurationError('input', 'must be JSON-serialisable', { cause: String(cause) });
  }
  return text ?? null;
}

/** The error's message and its cause's (a step's own failure), for `last_error`. */
function withCause(error: EffectivelyOnceError): string {
  const cause: unknown = error.cause;
  if (cause === undefined) return error.message;
  return `${error.message}: ${cause instanceof Error ? cause.message : inspect(cause, { depth: 2 })}`;
}

function sha256(text: string): Buffer {
  return createHash('sha256').update(text, 'utf8').digest();
}
