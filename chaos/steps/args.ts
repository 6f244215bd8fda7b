import { parseArgs } from 'node:util';
import { choiceOption, intOption, numberOption, UsageError } from '../../kit/args.js';

/** The frameworks the steps server runs its HTTP door on. */
export const STEPS_FRAMEWORKS = ['express', 'fastify'] as const;
export type StepsFramework = (typeof STEPS_FRAMEWORKS)[number];

/** What one steps chaos run does; see `stepsUsage()`. */
export interface StepsChaosArgs {
  target: 'steps';
  framework: StepsFramework;
  /** Logical operations (`op-<i>`), one idempotency key and one body each. */
  operations: number;
  /** Operations in flight at once. */
  clients: number;
  /** Share of the retrying operations sent by a second caller at the same time. */
  duplicateRatio: number;
  /**
   * Share of operations whose client sends one attempt and walks away, whatever it
   * gets: only the completer can finish them.
   */
  abandonRatio: number;
  /** Operations whose card the provider declines (a final error: 402 stored, no charge). */
  declines: number;
  /** SIGKILLs of the server process (half at a step boundary, half at a random moment). */
  kills: number;
  /** Postgres crash-restarts. */
  pgRestarts: number;
  /** Operations whose first provider calls meet a fault (timeout, 5xx before / after applying, dropped answer). */
  providerFaults: number;
  /** Shares of client exchanges the proxy in front of the server drops, resets or delays. */
  drop: number;
  reset: number;
  delay: number;
  /** idempotentFetch's attemptTimeoutMs; a delayed answer is held longer than this. */
  attemptTimeoutMs: number;
  /** The flows' lease: how long a killed owner's flow waits before a retry or the completer takes it over. */
  leaseMs: number;
  seed: number;
  timeoutMs: number;
  keep: boolean;
}

export function stepsUsage(): string {
  return `usage: tsx chaos/main.ts --target steps [options]

A server (a three-step flow: DB step 'order', provider call 'charge', DB step
'record') in a child process, behind a fault-injecting proxy; callers using
idempotentFetch; a test payment provider that deduplicates by Idempotency-Key,
with faults of its own; the server SIGKILLed at step boundaries and at random,
Postgres crash-restarted; the completer finishing what no client comes back for.

  --operations N      logical operations, one idempotency key each (default 1000)
  --clients C         operations in flight at once (default 16)
  --duplicates R      share of operations also sent by a second, concurrent caller
                      with the same key and bytes, 0 to 1 (default 0.1)
  --abandon R         share of operations sent once by a client that never retries,
                      0 to 0.5: the completer must finish them (default 0.1)
  --declines D        operations whose card the provider declines (default N/50, >= 2)
  --kills K           server SIGKILLs, alternately at a flow boundary (inside a DB step
                      before its COMMIT, a DB step committed, a provider call answered
                      before its result is recorded) and at a random moment (default 6)
  --pg-restarts R     Postgres crash-restarts (default 1)
  --provider-faults F operations whose first 1-2 provider calls meet a fault, spread
                      over timeout (applied, answered late), 5xx before applying, 5xx
                      after applying and a dropped answer (applied) (default N/100)
  --drop F            share of client exchanges whose response is dropped (default 0.05)
  --reset F           share reset before the request arrives (default 0.03)
  --delay F           share held past the client's attempt timeout (default 0.02)
  --attempt-timeout MS
                      idempotentFetch attemptTimeoutMs (default 3000)
  --lease MS          the flows' owner lease (default 2000)
  --framework F       express or fastify (default fastify)
  --seed S            seed of the plan and the faults (default: random)
  --timeout SECONDS   fail when the operations are not all answered by then
                      (default 180 + N/15)
  --keep              keep the chaos schema after a successful run

Postgres is started privately unless DATABASE_URL is set (then it is not restarted).`;
}

export function parseStepsChaosArgs(argv: string[]): StepsChaosArgs {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    options: {
      target: { type: 'string' },
      operations: { type: 'string' },
      clients: { type: 'string' },
      duplicates: { type: 'string' },
      abandon: { type: 'string' },
      declines: { type: 'string' },
      kills: { type: 'string' },
      'pg-restarts': { type: 'string' },
      'provider-faults': { type: 'string' },
      drop: { type: 'string' },
      reset: { type: 'string' },
      delay: { type: 'string' },
      'attempt-timeout': { type: 'string' },
      lease: { type: 'string' },
      framework: { type: 'string' },
      seed: { type: 'string' },
      timeout: { type: 'string' },
      keep: { type: 'boolean' },
      help: { type: 'boolean' },
    },
  });
  if (values.help === true) throw new UsageError('');
  if (values.target !== 'steps') throw new UsageError('--target must be steps');
  const operations = intOption('operations', values.operations, 1000, 1, 1_000_000);
  const drop = numberOption('drop', values.drop, 0.05, 0, 1);
  const reset = numberOption('reset', values.reset, 0.03, 0, 1);
  const delay = numberOption('delay', values.delay, 0.02, 0, 1);
  if (drop + reset + delay > 0.9) throw new UsageError('--drop + --reset + --delay must be <= 0.9');
  const declines = intOption(
    'declines',
    values.declines,
    Math.max(2, Math.round(operations / 50)),
    0,
    operations,
  );
  const providerFaults = intOption(
    'provider-faults',
    values['provider-faults'],
    Math.max(4, Math.round(operations / 100)),
    0,
    operations,
  );
  if (declines + providerFaults > operations)
    throw new UsageError('--declines + --provider-faults must be <= --operations');
  return {
    target: 'steps',
    framework: choiceOption('framework', values.framework, STEPS_FRAMEWORKS, 'fastify'),
    operations,
    clients: intOption('clients', values.clients, 16, 1, 1000),
    duplicateRatio: numberOption('duplicates', values.duplicates, 0.1, 0, 1),
    abandonRatio: numberOption('abandon', values.abandon, 0.1, 0, 0.5),
    declines,
    // Every kill is planned at a boundary count below the run's, so each one can happen.
    kills: intOption('kills', values.kills, 6, 0, Math.max(0, Math.floor(operations / 4))),
    pgRestarts: intOption('pg-restarts', values['pg-restarts'], 1, 0, 10),
    providerFaults,
    drop,
    reset,
    delay,
    attemptTimeoutMs: intOption('attempt-timeout', values['attempt-timeout'], 3000, 100, 60_000),
    leaseMs: intOption('lease', values.lease, 2000, 200, 60_000),
    seed: intOption('seed', values.seed, Math.floor(Math.random() * 2 ** 31), 0, 2 ** 32 - 1),
    timeoutMs:
      intOption('timeout', values.timeout, Math.ceil(180 + operations / 15), 1, 86_400) * 1000,
    keep: values.keep === true,
  };
}
