import pg from 'pg';
import type { Pool, PoolClient } from 'pg';

/** What a connected pg `Client` knows about its backend and where it connected. */
interface BackendOf {
  processID?: unknown;
  secretKey?: unknown;
  host?: unknown;
  port?: unknown;
  connectionParameters?: { ssl?: unknown; sslnegotiation?: unknown };
}

/** The pieces of pg's `Connection` a cancel uses (pg's own `Client#cancel` uses the same). */
interface CancelConnection {
  readonly stream: { destroy(): void };
  connect(portOrPath: number | string, host?: string): void;
  requestSsl(): void;
  cancel(processID: number, secretKey: number): void;
  on(event: 'connect' | 'sslconnect' | 'end', listener: () => void): unknown;
  on(event: 'error', listener: (error: Error) => void): unknown;
}

/**
 * Asks the server to cancel what `client`'s backend is running, with the protocol's own
 * CancelRequest: the backend's pid and secret key, sent over a socket of its own,
 * outside the pool. A saturated pool (the usual state when handlers time out) cannot
 * delay it, and it needs no session, no authentication and no free backend.
 *
 * pg's `Connection` opens the socket (the client's host and port, its SSL settings, a
 * `stream` factory of the pool's config) and writes the message, as pg's own
 * `Client#cancel` does; this only drives it. A backend that is idle ignores the
 * request, and a pid since reused by another session has another secret key.
 *
 * Resolves once the server closed the cancel's socket (it answers nothing), rejects on
 * an error before the request was sent or when nothing happened within `timeoutMs`.
 */
export function cancelBackend(client: PoolClient, pool: Pool, timeoutMs: number): Promise<void> {
  const target = client as unknown as BackendOf;
  const { processID, secretKey, host, port } = target;
  if (
    typeof processID !== 'number' ||
    typeof secretKey !== 'number' ||
    typeof host !== 'string' ||
    typeof port !== 'number'
  )
    return Promise.reject(new Error('the client has no backend key data to cancel with'));
  const ssl = target.connectionParameters?.ssl ?? false;
  const sslNegotiation = target.connectionParameters?.sslnegotiation;
  const stream = (pool.options as { stream?: unknown } | undefined)?.stream;
  const con = new pg.Connection({
    ssl: ssl as pg.ClientConfig['ssl'],
    // A socket factory (a cloud connector's) is how this pool reaches the server at all.
    ...(typeof stream === 'function' ? { stream: stream as pg.ClientConfig['stream'] } : {}),
    ...(typeof sslNegotiation === 'string' ? { sslNegotiation } : {}),
  }) as unknown as CancelConnection;
  return new Promise<void>((resolve, reject) => {
    let sent = false;
    let settled = false;
    const done = (error?: Error): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      con.stream.destroy();
      if (error === undefined) resolve();
      else reject(error);
    };
    const timer = setTimeout(
      () => done(new Error(`the cancel request got no answer within ${timeoutMs} ms`)),
      timeoutMs,
    );
    const send = (): void => {
      sent = true;
      con.cancel(processID, secretKey);
    };
    // The server closes the socket once it has the request; a reset then is the same news.
    con.on('end', () => done(sent ? undefined : new Error('closed before the cancel was sent')));
    con.on('error', (error) => done(sent ? undefined : error));
    con.on('connect', () => {
      // As pg's Client: SSL first (unless negotiated directly, which upgrades on its own).
      if (ssl === false) send();
      else if (sslNegotiation !== 'direct') con.requestSsl();
    });
    con.on('sslconnect', send);
    if (host.startsWith('/')) con.connect(`${host}/.s.PGSQL.${port}`);
    else con.connect(port, host);
  });
}
