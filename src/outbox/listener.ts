import pg from 'pg';
import { retryDelay } from '../backoff.js';
import { quoteIdentifier } from '../store/identifiers.js';

/** What the relay's LISTEN connection reports. */
export interface ListenerHooks {
  /** A notification arrived, or the connection was (re)established (a NOTIFY may have been missed). */
  wake(): void;
  /** The connection failed or was lost; it is being re-established. */
  lost(error: unknown): void;
}

/**
 * A dedicated connection that LISTENs on the outbox channel (a pooled one cannot: the
 * pool hands it to others and LISTEN is per session). When it is lost it reconnects
 * with jittered backoff; meanwhile the relay's polling still finds every row, only
 * later.
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
