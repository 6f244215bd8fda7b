/**
 * The payment endpoint, `POST /charges`, on Express 5 behind each contender, wired the
 * way its own README shows. The business logic is the same everywhere: a 50 ms call
 * standing in for the payment provider, then one `charges` row; right after that row
 * committed, an armed request dies there (`crashPoint`).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import express, { type Express, type Request } from 'express';
import {
  getSharedIdempotencyService,
  idempotency as expressIdempotency,
} from 'express-idempotency';
import { Idempotency, IdempotencyError, IdempotencyErrorCodes } from '@node-idempotency/core';
import { MemoryStorageAdapter } from '@node-idempotency/storage-adapter-memory';
import type pg from 'pg';
import { createIdempotency } from 'effectively-once/http';
import { idempotentExpress } from 'effectively-once/http/express';
import { charge } from '../../kit/payments/payments.js';
import type { Contender } from './contenders.js';
import { PostgresDataAdapter } from './express-idempotency-pg.js';
import { PostgresStorageAdapter } from './node-idempotency-pg.js';
import type { CrashPoint } from './crash-point.js';

/** The payment provider's latency: long enough for concurrent duplicates to overlap. */
const PROVIDER_MS = 50;

/** What every contender's wiring gets. */
export interface Mount {
  app: Express;
  contender: Contender;
  /** The app's pool (search_path: `schema`), for the charge and the Postgres stores. */
  pool: pg.Pool;
  schema: string;
  crash: CrashPoint;
}

/** Mounts `POST /charges` for `m.contender` on `m.app`. */
export function mountCharges(m: Mount): void {
  switch (m.contender) {
    case 'effectively-once':
      return effectivelyOnce(m);
    case 'express-idempotency/memory':
    case 'express-idempotency/postgres':
      return expressIdempotencyApp(m);
    case 'node-idempotency/memory':
    case 'node-idempotency/postgres-24h':
    case 'node-idempotency/postgres-3s':
      return nodeIdempotencyApp(m);
  }
}

/** The charge as a handler without a transaction of its own writes it: autocommit. */
async function chargeAutocommit(pool: pg.Pool, key: string, body: unknown): Promise<object> {
  await sleep(PROVIDER_MS);
  const { customerId, amountCents } = body as { customerId?: unknown; amountCents?: unknown };
  const { rows } = await pool.query<{ id: string }>(
    `INSERT INTO charges (tenant, customer_id, amount_cents, idem_key)
     VALUES ('t0', $1, $2, $3) RETURNING id`,
    [String(customerId), Number(amountCents), key],
  );
  return { id: rows[0]?.id, customerId, amountCents, key };
}

function keyOf(req: Request): string {
  return req.get('idempotency-key') ?? '';
}

/** effectively-once: the charge in `ctx.tx`; the crash point is `onCommitted` (after COMMIT, before the answer). */
function effectivelyOnce({ app, pool, schema, crash }: Mount): void {
  const idempotency = createIdempotency({
    pool,
    schema,
    scope: 't0',
    onCommitted: ({ key }) => crash.reached(key),
  });
  app.post(
    '/charges',
    idempotentExpress(idempotency, async (req, res, ctx) => {
      crash.arm(req, ctx.key);
      const created = await charge(ctx, req.body as object, {
        beforeEffect: () => sleep(PROVIDER_MS),
      });
      res.status(201).json(created);
    }),
  );
}

/** express-idempotency: its middleware, then the handler checks `isHit` as its README says. */
function expressIdempotencyApp({ app, contender, pool, crash }: Mount): void {
  app.use(express.json());
  const dataAdapter =
    contender === 'express-idempotency/postgres' ? new PostgresDataAdapter(pool) : undefined;
  app.post('/charges', expressIdempotency(dataAdapter ? { dataAdapter } : {}), async (req, res) => {
    const service = getSharedIdempotencyService();
    if (service.isHit(req)) return;
    crash.arm(req, keyOf(req));
    let created: object;
    try {
      created = await chargeAutocommit(pool, keyOf(req), req.body);
    } catch (error) {
      await service.reportError(req);
      throw error;
    }
    crash.reached(keyOf(req));
    res.status(201).json(created);
  });
}

/** @node-idempotency/core: `onRequest` before the logic, `onResponse` after it, as its README's flow. */
function nodeIdempotencyApp({ app, contender, pool, crash }: Mount): void {
  app.use(express.json());
  const storage =
    contender === 'node-idempotency/memory'
      ? new MemoryStorageAdapter()
      : new PostgresStorageAdapter(pool);
  const idempotency = new Idempotency(
    storage,
    contender === 'node-idempotency/postgres-3s' ? { cacheTTLMS: 3000 } : {},
  );
  app.post('/charges', async (req, res) => {
    const request = {
      method: req.method,
      path: req.path,
      headers: req.headers,
      body: req.body as Record<string, unknown>,
    };
    let cached: { body?: unknown; additional?: Record<string, unknown> } | undefined;
    try {
      cached = await idempotency.onRequest(request);
    } catch (error) {
      if (!(error instanceof IdempotencyError)) throw error;
      res.status(problemStatus(error.code)).json({ error: error.message, code: error.code });
      return;
    }
    if (cached) {
      res.status(Number(cached.additional?.['status'] ?? 200)).json(cached.body);
      return;
    }
    crash.arm(req, keyOf(req));
    const created = await chargeAutocommit(pool, keyOf(req), req.body);
    crash.reached(keyOf(req));
    await idempotency.onResponse(request, { body: created, additional: { status: 201 } });
    res.status(201).json(created);
  });
}

/** The draft IETF Idempotency-Key header's answers for its errors. */
function problemStatus(code: IdempotencyErrorCodes): number {
  switch (code) {
    case IdempotencyErrorCodes.REQUEST_IN_PROGRESS:
      return 409;
    case IdempotencyErrorCodes.IDEMPOTENCY_FINGERPRINT_MISSMATCH:
      return 422;
    default:
      return 400;
  }
}
