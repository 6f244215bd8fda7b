import pg from 'pg';
import { retryDelay } from '../backoff.js';
import { quoteIdentifier } from '../store/identifiers.js';

/** What the relay's LISTEN connection reports. */
export interface ListenerHooks {
  /** A notification arrived, or the connection was (re)established (a NOTIFY may have been missed). */
  wake(): void;
  /** The connection failed or was lost; it is being re-established. */
  lost(error: unknown): void;
  /**
   * The connection goes through a connection pooler: LISTEN would land on a server
   * connection the pooler hands to other clients, so it was closed and not retried.
   */
  pooled(backend: { keyPid: number; backendPid: number }): void;
}

/**
 * The backend pid the server reports beside the one the connection was given at
 * startup (BackendKeyData). Postgres gives its own pid; a pooler (PgBouncer, and the
 * like) answers the startup itself with a key of its own, so the two differ. Undefined
 * when the connection has no key data to compare.
 */
async function poolerPids(
  client: pg.Client,
): Promise<{ keyPid: number; backendPid: number } | undefined> {
  const keyPid = (client as unknown as { processID?: unknown }).processID;
  if (typeof keyPid !== 'number') return undefined;
  const { rows } = await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
  const backendPid = rows[0]?.pid;
  return backendPid === undefined || backendPid === keyPid ? undefined : { keyPid, backendPid };
}

/**
 * A dedicated connection that LISTENs on the outbox channel (a pooled one cannot: the
 * pool hands it to others and LISTEN is per session). When it is lost it reconnects
 * with jittered backoff; meanwhile the relay's polling still finds every row, only
 * later. LISTEN is session state, which a pooler in transaction mode does not keep: a
 * connection that turns out to go through one is closed and reported (`pooled`).
 */
export class NotifyListener {
  private client: pg.Client | undefined;
  private closed = false;
  private failures = 0;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly config: pg.ClientConfig,
    private readonly channel: string,
    private readonly hooks: ListenerHooks,
  ) {}

  /** Connects and LISTENs; resolves once the first attempt succeeded or failed. */
  async start(): Promise<void> {
    await this.connect();
  }

  private async connect(): Promise<void> {
    if (this.closed) return;
    const client = new pg.Client(this.config);
    this.client = client;
    let dropped = false;
    const drop = (error: unknown): void => {
      if (dropped) return;
      dropped = true;
      client.removeAllListeners('notification');
      void client.end().catch(() => undefined);
      if (this.closed) return;
      this.hooks.lost(error);
      this.failures++;
      this.timer = setTimeout(
        () => void this.connect(),
        retryDelay(this.failures, { initialMs: 100, maxMs: 10_000 }),
      );
    };
    client.on('error', drop);
    client.on('end', () => drop(new Error('LISTEN connection ended')));
    client.on('notification', () => this.hooks.wake());
    try {
      await client.connect();
      const pooler = await poolerPids(client);
      if (pooler !== undefined) {
        this.closed = true;
        this.client = undefined;
        client.removeAllListeners('end');
        client.on('error', () => undefined);
        await client.end().catch(() => undefined);
        this.hooks.pooled(pooler);
        return;
      }
      await client.query(`LISTEN ${quoteIdentifier(this.channel)}`);
      this.failures = 0;
      // Rows committed while this connection was down notified nobody.
      this.hooks.wake();
    } catch (error) {
      drop(error);
    }
  }

  /** Closes the connection and stops reconnecting. */
  async close(): Promise<void> {
    this.closed = true;
    if (this.timer !== undefined) clearTimeout(this.timer);
    const client = this.client;
    this.client = undefined;
    if (client !== undefined) {
      client.removeAllListeners('end');
      client.on('error', () => undefined);
      await client.end().catch(() => undefined);
    }
  }

  /** The backend pid of the LISTEN connection, for tests that cut it. */
  get pid(): number | undefined {
    return (this.client as unknown as { processID?: number } | undefined)?.processID;
  }
}
