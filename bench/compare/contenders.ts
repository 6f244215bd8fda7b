/**
 * The Idempotency-Key middlewares the comparison runs, each on the same Express 5
 * payment app (server.ts) and the same Postgres. Shared by the parent (labels) and
 * the server process (which wiring to mount).
 */
export const CONTENDERS = [
  'effectively-once',
  'express-idempotency/memory',
  'express-idempotency/postgres',
  'node-idempotency/memory',
  'node-idempotency/postgres-24h',
  'node-idempotency/postgres-3s',
] as const;

export type Contender = (typeof CONTENDERS)[number];

/** What the table says about each: the middleware and where it keeps its keys. */
export const CONTENDER_LABELS: Record<Contender, { middleware: string; store: string }> = {
  'effectively-once': {
    middleware: 'effectively-once/http/express',
    store: "Postgres, in the charge's transaction",
  },
  'express-idempotency/memory': {
    middleware: 'express-idempotency',
    store: 'in-memory (its default)',
  },
  'express-idempotency/postgres': {
    middleware: 'express-idempotency',
    store: 'Postgres (bench/compare/express-idempotency-pg.ts)',
  },
  'node-idempotency/memory': {
    middleware: '@node-idempotency/core',
    store: 'in-memory (storage-adapter-memory, as its README shows)',
  },
  'node-idempotency/postgres-24h': {
    middleware: '@node-idempotency/core',
    store: 'Postgres (bench/compare/node-idempotency-pg.ts), 24 h TTL (its default)',
  },
  'node-idempotency/postgres-3s': {
    middleware: '@node-idempotency/core',
    store: 'Postgres (bench/compare/node-idempotency-pg.ts), 3 s TTL',
  },
};

/** The request header that arms a payment's first attempt (server.ts reads it). */
export const ARM_HEADER = 'x-compare-arm';

/**
 * What an armed request does right after its charge committed, before any answer:
 * `kill`: the server SIGKILLs itself; `drop`: it destroys the connection and lives on
 * (a dropped answer: a proxy timeout, a client that gave up).
 */
export type ArmMode = 'kill' | 'drop';

export function isContender(value: string): value is Contender {
  return (CONTENDERS as readonly string[]).includes(value);
}
