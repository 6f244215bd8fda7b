import pg from 'pg';
import type { Pool } from 'pg';
import { ReplicaUnconfirmedError, ReplicaUnseenError } from '../errors.js';
import type { ResolvedReplicaSafe } from './options.js';
import { parseLsn, WaiterQueue, type Waiter } from './waiters.js';

/** How the watched standby stands, as last polled. */
export type ReplicaState = 'streaming' | 'lagging' | 'missing' | 'disconnected';

/** A change of {@link ReplicaState}, for the door's events, logs and health. */
export interface ReplicaReport {
  /** Where the standby stands now. */
  state: ReplicaState;
  /** What happened, for a log line. */
  detail: string;
  /** The standby's distance behind the primary's insert position, in bytes, when known. */
  lagBytes?: number;
}

/** The watched standby as last polled: a door's `stats().replica` (with `replicaSafe`). */
export interface ReplicaStatus {
  /** Where the standby stood at the last poll; undefined before the first (and in mode `synchronous-commit`, which does not poll). */
  state: ReplicaState | undefined;
  /** The standby's distance behind the primary's insert position, in bytes, at the last poll that saw it. */
  lagBytes: number | undefined;
}

/** How one wait ended. */
export type WaitResult =
  | { kind: 'confirmed' }
  | { kind: 'degraded'; reason: 'lag' | 'disconnected' }
  | { kind: 'unconfirmed'; error: ReplicaUnconfirmedError };

/**
 * Taken before the claim transaction opens: the poller's session then. A wait is
 * confirmed only by a session alive since before the transaction began, so the server
 * polled is the one the commit was made on (a connection does not move between servers;
 * a failover cuts it).
 */
export interface Ticket {
  readonly session: number;
}

type Wait = ResolvedReplicaSafe & { mode: 'wait' };

const STARTED_COLUMN = 'pg_postmaster_start_time()::text AS started';
const STARTED = `SELECT ${STARTED_COLUMN}`;

/** A poll reached another server than the session's (see `ReplicaPoller.server`). */
class ServerChanged extends Error {
  constructor() {
    super('the server behind the connection changed (a pooler reconnected it)');
  }
}

// Applications that stream WAL without being a standby a failover could promote.
const NOT_STANDBYS = ['pg_basebackup', 'pg_receivewal'];

/**
 * One per pool and setting: polls the primary on one connection of its own while waits
 * are pending, one query per tick for all of them (see {@link WaiterQueue}).
 */
export class ReplicaPoller {
  private client: pg.Client | undefined;
  /** The live session's number; 0 while none is. */
  private session = 0;
  /**
   * The session's server, by its postmaster start time. A pooler (PgBouncer, RDS Proxy)
   * keeps the client connection across a failover and sends the next poll to the new
   * primary, whose positions say nothing of the old one's commits: a poll that finds
   * another server breaks the session, as a cut connection would.
   */
  private server: string | undefined;
  private sessions = 0;
  private connecting: Promise<void> | undefined;
  private polling = false;
  private timer: NodeJS.Timeout | undefined;
  private readonly queue = new WaiterQueue<(result: WaitResult) => void>();
  private state: ReplicaState | undefined;
  private readonly listeners = new Set<(report: ReplicaReport) => void>();
  private closed = false;
  /** The standby's distance behind the primary, in bytes, as last polled. */
  lagBytes: number | undefined;

  constructor(
    private readonly pool: Pool,
    private readonly cfg: Wait,
  ) {}

  /** Subscribes to state changes; returns the unsubscribe. */
  onReport(listener: (report: ReplicaReport) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** The state as last polled (undefined before the first poll). */
  get current(): ReplicaState | undefined {
    return this.state;
  }

  /** Connects and polls once: throws {@link ReplicaUnseenError} when the standby cannot be seen. */
  async check(): Promise<void> {
    await this.connect();
    let probe = await this.probe();
    // A standby that just (re)connected shows its row before its first report: waited for.
    for (
      const until = Date.now() + Math.min(this.cfg.maxWaitMs, 5000);
      probe.position === undefined && probe.reporting === false && Date.now() < until;
      probe = await this.probe()
    )
      await new Promise((resolve) => setTimeout(resolve, 100));
    if (probe.position === undefined)
      throw new ReplicaUnseenError(probe.unseen ?? 'no standby', {
        names: this.cfg.names,
        count: this.cfg.count,
      });
  }

  begin(): Ticket {
    if (this.session === 0 && !this.closed) void this.connect().catch(() => undefined);
    return { session: this.session };
  }

  /** Resolves once the standby has every commit made before the call (see {@link Ticket}). */
  wait(ticket: Ticket): Promise<WaitResult> {
    if (ticket.session === 0 || ticket.session !== this.session)
      return Promise.resolve(this.giveUp('disconnected'));
    return new Promise<WaitResult>((resolve) => {
      this.queue.add(resolve, Date.now() + this.cfg.maxWaitMs);
      this.schedule(0);
    });
  }

  close(): void {
    this.closed = true;
    clearTimeout(this.timer);
    this.breakSession('the door stopped');
  }

  private giveUp(reason: 'lag' | 'disconnected'): WaitResult {
    return this.cfg.onLag === 'degrade'
      ? { kind: 'degraded', reason }
      : { kind: 'unconfirmed', error: new ReplicaUnconfirmedError(reason) };
  }

  private connect(): Promise<void> {
    if (this.session !== 0) return Promise.resolve();
    this.connecting ??= (async () => {
      const client = new pg.Client({
        ...this.pool.options,
        application_name: 'effectively-once replica watch',
        query_timeout: Math.min(this.cfg.maxWaitMs, 10_000),
      });
      client.on('error', () => this.breakSession('the connection failed'));
      try {
        await client.connect();
      } catch (error) {
        await client.end().catch(() => undefined);
        throw error;
      }
      if (this.closed) {
        await client.end().catch(() => undefined);
        return;
      }
      this.server = (await client.query<{ started: string }>(STARTED)).rows[0]!.started;
      this.client = client;
      this.session = ++this.sessions;
    })().finally(() => (this.connecting = undefined));
    return this.connecting;
  }

  private schedule(ms: number): void {
    if (this.polling || this.timer !== undefined || this.closed) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.tick();
    }, ms);
  }

  private async tick(): Promise<void> {
    if (this.queue.size === 0) return;
    this.polling = true;
    const session = this.session;
    const mark = this.queue.mark();
    try {
      const probe = await this.probe();
      if (session !== this.session) return; // broken meanwhile: its waiters are settled
      this.queue.assign(mark, probe.head);
      if (probe.position !== undefined)
        for (const w of this.queue.release(probe.position)) settle(w, { kind: 'confirmed' });
      else if (this.cfg.onLag === 'degrade')
        for (const w of this.queue.drain()) settle(w, this.giveUp('lag'));
    } catch (error) {
      this.breakSession(error instanceof ServerChanged ? error.message : 'a poll failed');
    } finally {
      this.polling = false;
    }
    const expired = this.queue.expire(Date.now());
    if (expired.length > 0) {
      this.report('lagging', `${expired.length} wait(s) ran past maxWaitMs`, this.lagBytes);
      for (const w of expired) settle(w, this.giveUp('lag'));
    }
    if (this.queue.size > 0) this.schedule(this.cfg.pollIntervalMs);
  }

  /** One poll: the primary's insert position, and the watched standbys' positions. */
  private async probe(): Promise<{
    head: bigint;
    position?: bigint;
    unseen?: string;
    /** false: standbys are seen, with the privilege to read them, but not reporting yet. */
    reporting?: boolean;
  }> {
    const client = this.client;
    if (client === undefined) throw new Error('not connected');
    const column = this.cfg.level === 'apply' ? 'replay_lsn' : 'flush_lsn';
    // Without pg_read_all_stats (pg_monitor has it) a role sees the standbys' rows with
    // every position NULL: told apart from a standby that has not reported yet.
    const { rows } = await client.query<{
      head: string;
      started: string;
      privileged: boolean;
      standbys: { name: string; lsn: string | null }[];
    }>(
      `SELECT pg_current_wal_insert_lsn()::text AS head,
              ${STARTED_COLUMN},
              pg_has_role('pg_read_all_stats', 'USAGE') AS privileged,
              coalesce(json_agg(json_build_object('name', application_name, 'lsn', ${column}::text)), '[]'::json) AS standbys
         FROM pg_stat_replication
        WHERE ($1::text[] IS NULL AND NOT application_name = ANY($2::text[])) OR application_name = ANY($1::text[])`,
      [this.cfg.names ?? null, NOT_STANDBYS],
    );
    if (rows[0]!.started !== this.server) throw new ServerChanged();
    const head = parseLsn(rows[0]!.head);
    const standbys = rows[0]!.standbys;
    const positions = standbys
      .flatMap((s) => (s.lsn === null ? [] : [parseLsn(s.lsn)]))
      .sort((a, b) => (a < b ? 1 : a > b ? -1 : 0));
    const position = positions[this.cfg.count - 1];
    if (position === undefined) {
      const unseen =
        standbys.length === 0
          ? `no ${this.cfg.names === undefined ? 'standby' : `standby named ${this.cfg.names.join(' or ')}`} in pg_stat_replication (or the role may not see it: grant pg_monitor)`
          : !rows[0]!.privileged
            ? `pg_stat_replication shows ${column} as NULL: the role lacks pg_monitor (or pg_read_all_stats)`
            : `${positions.length} standby(s) report ${column}, ${this.cfg.count} required`;
      this.report('missing', unseen);
      return { head, unseen, reporting: standbys.length === 0 || !rows[0]!.privileged };
    }
    this.lagBytes = head > position ? Number(head - position) : 0;
    // Behind is the steady state of an asynchronous standby: 'lagging' is said only when
    // a wait ran out (see tick), and 'streaming' once it confirms again.
    if (this.state !== 'lagging' || this.queue.size === 0)
      this.report('streaming', `${this.lagBytes} bytes behind`, this.lagBytes);
    return { head, position };
  }

  private report(state: ReplicaState, detail: string, lagBytes?: number): void {
    // 'lagging' is the steady state of an asynchronous standby under load: reported
    // once per change, like the rest.
    if (state === this.state) return;
    this.state = state;
    const report: ReplicaReport = {
      state,
      detail,
      ...(lagBytes !== undefined ? { lagBytes } : {}),
    };
    for (const listener of this.listeners) listener(report);
  }

  /**
   * The session is gone (or no longer trusted): every pending wait is settled as
   * unconfirmed (or degraded), since a new session may reach another server.
   */
  private breakSession(detail: string): void {
    const client = this.client;
    this.client = undefined;
    this.session = 0;
    this.server = undefined;
    if (client !== undefined) void client.end().catch(() => undefined);
    for (const w of this.queue.drain()) settle(w, this.giveUp('disconnected'));
    if (!this.closed) this.report('disconnected', detail);
  }
}

function settle(waiter: Waiter<(result: WaitResult) => void>, result: WaitResult): void {
  waiter.value(result);
}
