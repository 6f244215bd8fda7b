import type { Pool, PoolClient } from 'pg';
import { DatabaseError, describe } from '../errors.js';

/**
 * `pool.connect()` bounded by `timeoutMs` and `signal`: a pool with no free
 * connection (a handler holding its own, a pool smaller than the concurrency) must not
 * hang a delivery, or `stop()` behind it, forever. A client that arrives after we gave
 * up goes straight back to the pool.
 */
export function acquireClient(
  pool: Pool,
  timeoutMs: number,
  signal: AbortSignal | undefined,
): Promise<PoolClient> {
  // Fast path, most deliveries: pg-pool serves its queue in order from idle clients, so
  // with more idle clients than waiters this request is served at its next tick; no
  // timer or abort listener is needed for a wait that will not happen.
  const counts = pool as Partial<Pick<Pool, 'idleCount' | 'waitingCount'>>;
  if (signal?.aborted !== true && (counts.idleCount ?? 0) > (counts.waitingCount ?? Infinity)) {
    return pool.connect().catch((cause: unknown) => {
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
        if (finish()) resolve(client);
        else client.release();
      },
      (cause: unknown) => {
        if (finish()) reject(new DatabaseError('connect', cause));
      },
    );
  });
}

function toError(reason: unknown): Error {
  return reason instanceof Error ? reason : new Error(`aborted: ${describe(reason)}`);
}
