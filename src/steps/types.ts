/**
 * The public shapes of steps: a flow (a named function of recorded steps), the `run`
 * object its function drives them with, and the answers it ends with. The runner is in
 * runner.ts; the doors (HTTP, consumer, completer) call it.
 */
import type { Pool, PoolClient } from 'pg';
import type { ClaimBusyError, EffectivelyOnceError } from '../errors.js';
import type { Logger } from '../types.js';
import type { StepsTelemetry } from './telemetry.js';

/**
 * What a flow ends with, stored once and replayed after: an HTTP door answers it as a
 * JSON response (`body` serialised with `application/json`, none when undefined); the
 * consumer door acks the message once it is stored. `body` must be JSON-serialisable.
 */
export interface FlowAnswer {
  /** HTTP status (100–599). A consumer's flow may answer anything in that range too. */
  status: number;
  /** JSON body. Undefined: an empty body. */
  body?: unknown;
  /** Extra response headers (stored and replayed). */
  headers?: Record<string, string>;
}

/**
 * The `run` a flow's function gets: each `step` and `call` is recorded by name, in
 * order, under the flow's key. A run that finds a step already recorded returns its
 * recorded result without running it (a replay); the first step not recorded runs.
 * Results are JSON: each is returned as its JSON round trip (`JSON.parse(JSON.stringify(r))`),
 * on the first run too, so a replay sees exactly what the first run saw. A result that
 * JSON cannot hold (a bigint, a cycle, a function) fails the step with
 * `StepResultNotJsonError` (its transaction rolls back).
 */
export interface FlowRun {
  /** The flow's name. */
  readonly flow: string;
  /** The key's scope (the HTTP door's tenant + method + route, the consumer's name). */
  readonly scope: string;
  /** The flow's key (the request's Idempotency-Key, the message's dedup key). */
  readonly key: string;
  /**
   * This owner's fencing token: 1 for the first run, one more at every takeover. Every
   * step this owner records is refused once a later owner took over.
   */
  readonly fence: number;
  /** Whether this run took over an earlier one (some steps may be replayed). */
  readonly resumed: boolean;
  /** Aborts when this owner lost the flow (fenced) or the door shuts down. */
  readonly signal: AbortSignal;
  /**
   * A database step: `work` runs in a transaction of its own on the library's pool, and
   * its writes commit together with its recorded result (and this owner's lease, checked
   * against the fence in the same transaction: a stale owner commits nothing). Recorded
   * already: its result, without running `work`. Keep it shorter than `leaseMs` (the
   * lease is extended when it commits, not while it runs).
   */
  step<T>(name: string, work: (tx: PoolClient) => T | Promise<T>): Promise<T>;
  /**
   * An outside call (a payment provider, another service): `work` gets a key derived
   * from the flows table, the flow's scope, key and the step's name — the same on every
   * run and every owner; a name is used once per run (`charge-${i}` in a loop) — to send as the provider's idempotency key, and a signal that aborts when
   * this owner is fenced. Its result is recorded in a short transaction right after it
   * returns; recorded already: its result, without calling. The lease is extended by a
   * heartbeat while it runs. A provider that deduplicates on the key applies the call
   * once however many owners make it.
   */
  call<T>(name: string, work: (key: string, signal: AbortSignal) => T | Promise<T>): Promise<T>;
  /**
   * Ends the flow now with a final answer (a declined card's 402): stored and replayed,
   * nothing rolled back (what earlier steps did stays). Throws; `return run.fail(…)` or
   * call it from a step or a call (where it also fails that step).
   */
  fail(status: number, body?: unknown, headers?: Record<string, string>): never;
}

/** A flow's function: drive the steps with `run`, then answer. `input` is the recorded JSON. */
export type FlowFunction<I> = (input: I, run: FlowRun) => Promise<FlowAnswer>;

/**
 * Which failures of a step or a call end the flow with a stored answer (return it), and
 * which are transient (return undefined: the recovery point stays, the lease is released,
 * the door answers 503 + Retry-After or retries the message). Called with what the step
 * or call threw. The default is {@link defaultFinalError}.
 */
export type FinalErrorClassifier = (error: unknown, step: string) => FlowAnswer | undefined;

/** Options of {@link defineFlow}. */
export interface FlowOptions {
  /**
   * A version you bump when the steps change incompatibly: a key recorded under another
   * version is refused (`FlowStepsChangedError`) rather than resumed. Steps renamed or
   * reordered are refused anyway, step by step; this catches what names cannot (a
   * step's meaning changed).
   */
  version?: string;
  /** See {@link FinalErrorClassifier}. Default {@link defaultFinalError}. */
  finalError?: FinalErrorClassifier;
}

/** A registered flow: a stable name, its function, its options. Create with {@link defineFlow}. */
export interface Flow<I = unknown> {
  /** The stable name it is recorded under: never rename a flow with keys in flight. */
  readonly name: string;
  /** See {@link FlowOptions.version}. */
  readonly version: string | undefined;
  /** The flow's function. */
  readonly fn: FlowFunction<I>;
  /** See {@link FlowOptions.finalError} (the default filled in). */
  readonly finalError: FinalErrorClassifier;
}

/** Options shared by every runner of flows (the doors and the completer). */
export interface FlowStoreOptions {
  /** The pool every step's transaction comes from. */
  pool: Pool;
  /** Schema of the flows table. Default `public`. */
  schema?: string;
  /** Name of the flows table. Default `eo_flows`. */
  table?: string;
  /**
   * How long an owner's lease lasts, in ms: a retry or the completer takes over a flow
   * whose lease expired. Extended at every recorded step and by a heartbeat during a
   * call. Must exceed the longest database step. Default 30 000.
   */
  leaseMs?: number;
  /** Apply the table's migrations before the first flow (default true). */
  migrate?: boolean;
  /** Where the runner says what went wrong. Default: silent. */
  logger?: Logger;
  /**
   * Follows each step of each run (a span per step with `otelStepsTelemetry()` from
   * `effectively-once/otel`). Default: none.
   */
  telemetry?: StepsTelemetry;
}

/** Where a flow starts from: its key, its input, and what identifies the request. */
export interface FlowStart<I> {
  /** The key's scope. */
  scope: string;
  /** The flow's key. */
  key: string;
  /** The input, JSON, recorded with the first claim: a resumed run gets the recorded one. */
  input: I;
  /**
   * What else identifies the request (the HTTP door: method and route): a key that comes
   * back with another origin, another input or for another flow is refused.
   */
  origin?: string;
  /**
   * The request's fingerprint (the HTTP door's, over method, route, query and body).
   * Default: a SHA-256 of the input's canonical JSON.
   */
  fingerprint?: Buffer;
  /** How long to wait for a live owner of the key before answering busy. Default 0. */
  waitMs?: number;
  /** Aborts the run (shutdown): what is recorded stays, the lease is released. */
  signal?: AbortSignal;
}

/** How a flow's run ended. */
export type FlowOutcome =
  /**
   * The flow's final answer, stored: by this run (`replayed` false: its function ran to
   * its end, or failed with a final error), or found stored (`replayed` true).
   */
  | { kind: 'answered'; answer: FlowAnswer; replayed: boolean; resumed: boolean }
  /** A live owner holds the key past `waitMs` (`ClaimBusyError`): try again later. */
  | { kind: 'busy'; error: ClaimBusyError }
  /**
   * Refused, nothing run: the key was recorded for another flow, origin or input
   * (`FlowKeyReusedError`), or under steps that disagree with this deploy's
   * (`FlowStepsChangedError`: the flow stays unfinished for a deploy that knows it).
   */
  | { kind: 'refused'; error: EffectivelyOnceError }
  /**
   * Stopped at a recovery point: a transient failure of a step or a call
   * (`StepFailedError`), this owner fenced by a takeover before an answer was stored
   * (`FlowFencedError`), the database, or a COMMIT whose outcome stayed unknown. What is
   * recorded stays; the lease is released. Retry after `retryAfterMs`.
   */
  | { kind: 'retry'; error: EffectivelyOnceError; retryAfterMs: number };

/** Runs flows on one flows table: the doors use one; the completer drives its own. */
export interface FlowRunner {
  /**
   * Claims the key (recording `start.input` the first time), or takes it over once its
   * owner's lease expired, replays what is recorded, runs the rest, stores the answer.
   * Never rejects. A key that is empty, over 1024 characters, or holds a NUL or a lone
   * surrogate is refused (`EO_INVALID_KEY`), as is such a scope (`EO_CONFIGURATION`).
   */
  run<I>(flow: Flow<I>, start: FlowStart<I>): Promise<FlowOutcome>;
  /** Applies the flows table's pending migrations. */
  migrate(): Promise<void>;
}

/** Options of {@link createStepsCompleter}. */
export interface StepsCompleterOptions extends FlowStoreOptions {
  /** The flows it may finish, by name; a key recorded for another flow is left alone. */
  flows: ReadonlyArray<Flow<never>>;
  /** How often it looks for abandoned flows, in ms. Default 5 000. */
  intervalMs?: number;
  /** Flows driven per pass (oldest expired lease first). Default 50. */
  batchSize?: number;
}

/**
 * Finishes flows nobody is driving: those unfinished whose owner's lease expired (a
 * client that never retried, a message never redelivered), taken over and driven to
 * their final answer with the recorded input.
 */
export interface StepsCompleter {
  /** Starts the background passes. */
  start(): void;
  /** One pass now: how many flows it drove to a final answer. */
  runOnce(signal?: AbortSignal): Promise<number>;
  /** Stops the passes, aborting the one running (what it recorded stays). */
  stop(): Promise<void>;
}

/** Options of the consumer door's {@link flowHandler}. */
export interface FlowHandlerOptions<T, I> {
  /** The flow's input from the message. Default: the message itself. */
  input?: (message: T) => I;
  /** The flows' scope. Default `consumer`: give each consumer sharing a table its own. */
  scope?: string;
}

/** Options of an HTTP route that runs a flow (`idempotency.steps`, `stepsExpress`, `stepsFastify`). */
export interface StepsRouteOptions<I> {
  /**
   * The flow's input from the request, recorded at the first claim: default the parsed
   * JSON body (undefined when empty). Pick more (a path parameter, the tenant) here; the
   * request's fingerprint (method, route, query, body) still guards the key.
   */
  input?: (body: unknown, request: Request) => I | Promise<I>;
  /** Schema of the flows table. Default: the key table's. */
  schema?: string;
  /** Name of the flows table. Default `eo_flows`. */
  table?: string;
  /** See {@link FlowStoreOptions.leaseMs}. Default 30 000. */
  leaseMs?: number;
  /** See {@link FlowStoreOptions.telemetry}. Default: none. */
  telemetry?: StepsTelemetry;
}
