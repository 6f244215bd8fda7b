import type { Pool, PoolClient } from 'pg';
import { DatabaseError, describe } from '../errors.js';

/**
 * `pool.connect()` bounded by `timeoutMs` and `signal`: a pool with no free
 * connection (a handler holding its own, a pool smaller than the concurrency) must not
 * hang a delivery, or `stop()` behind it, forever. A client that arrives after we gave
 * up goes straight back to the pool. The client comes {@link guardClient guarded}.
 */
export function acquireClient(
  pool: Pool,
  timeoutMs: number,
  signal: AbortSignal | undefined,
): Promise<PoolClient> {
  guardNewClients(pool);
  // Fast path, most deliveries: pg-pool serves its queue in order from idle clients, so
  // with more idle clients than waiters this request is served at its next tick; no
  // timer or abort listener is needed for a wait that will not happen.
  const counts = pool as Partial<Pick<Pool, 'idleCount' | 'waitingCount'>>;
  if (signal?.aborted !== true && (counts.idleCount ?? 0) > (counts.waitingCount ?? Infinity)) {
    return pool.connect().then(guardClient, (cause: unknown) => {
      throw new DatabaseError('connect', cause);
    });
  }
  return new Promise<PoolClient>((resolve, reject) => {
    let settled = false;
    const finish = (): boolean => {
      if (settled) return false;
      settled = true;
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      return true;
    };
    const onAbort = () => {
      if (finish()) reject(toError(signal?.reason));
    };
    const timer = setTimeout(() => {
      if (finish())
        reject(
          new DatabaseError(
            'connect',
            new Error(`no pool connection free within ${timeoutMs} ms`),
            { timedOut: true, timeoutMs },
          ),
        );
    }, timeoutMs);
    if (signal?.aborted) {
      onAbort();
      return;
    }
    signal?.addEventListener('abort', onAbort, { once: true });
    pool.connect().then(
      (client) => {
        if (finish()) resolve(guardClient(client));
        else client.release();
      },
      (cause: unknown) => {
        if (finish()) reject(new DatabaseError('connect', cause));
      },
    );
  });
}

const guardedPools = new WeakSet<Pool>();
const guardedClients = new WeakSet<object>();
const ignore = (): void => undefined;

/**
 * Gives a pool client the library checks out an 'error' listener of its own, once per
 * client. pg-pool takes its idle listener off a client it hands out, and a client held
 * between two statements whose backend ends (a FATAL from `pg_terminate_backend` or a
 * Postgres restart, then the socket's end) emits 'error': with nobody listening, that
 * ends the process. {@link guardNewClients} only reaches clients connected after it
 * ran; an app that used its pool before handing it over (a table created at start-up)
 * has older ones, so every checkout is guarded too. The holder still learns of the
 * loss: pg marks the client broken and its next statement fails.
 */
export function guardClient<C extends object>(client: C): C {
  const emitter = client as { on?: (event: 'error', listener: () => void) => unknown };
  if (!guardedClients.has(client) && typeof emitter.on === 'function') {
    guardedClients.add(client);
    emitter.on('error', ignore);
  }
  return client;
}

/**
 * pg-pool hands a newly connected client out from inside its socket's data handler,
 * after taking its idle error listener off: an error in the same chunk (a backend
 * terminated while it started, as `pg_terminate_backend` or a Postgres shutdown does)
 * is emitted before the caller can add a listener, and an 'error' nobody listens to
 * ends the process. So every client the pool connects from now on keeps a listener
 * of its own. Losing the connection is still seen: pg marks the client unusable, and
 * the claim's first statement fails as a database error (retried).
 */
export function guardNewClients(pool: Pool): void {
  if (guardedPools.has(pool) || typeof pool.on !== 'function') return;
  guardedPools.add(pool);
  pool.on('connect', (client) => guardClient(client));
}

function toError(reason: unknown): Error {
  return reason instanceof Error ? reason : new Error(`aborted: ${describe(reason)}`);
}
