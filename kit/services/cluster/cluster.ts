import fs from 'node:fs';
import path from 'node:path';
import { pgStart, pgStop } from '../postgres.js';
import { sleep } from '../process.js';
import {
  createPrimary,
  killNode,
  promote,
  query,
  readDeadNode,
  seedStandby,
  setReplication,
  waitStreaming,
  type PgNode,
  type Replication,
} from './node.js';
import { PgProxy, type CaughtCommit, type CommitArm } from './pg-proxy.js';

/** What `pg_xact_status` on the new primary says of a COMMIT the failover left unknown. */
export type XactStatus = 'committed' | 'aborted' | 'in progress' | 'never replicated';

/** A COMMIT whose client never heard the outcome, and what the new primary says of it. */
export interface UnknownCommit {
  xid: string;
  status: XactStatus;
}

/** How one failover goes; every step is optional. */
export interface FailoverOptions {
  /** `kill`: SIGKILL the primary's processes (default); `stop`: a fast shutdown (57P01 to clients). */
  how?: 'kill' | 'stop';
  /** Fire right after a claim COMMIT was sent, or answered (the answer is withheld from its client). */
  arm?: CommitArm;
  /** How long to wait for an armed COMMIT before failing over anyway (default 5 s). */
  armWaitMs?: number;
  /**
   * Stall the replication link from the start, and (unarmed) this long before the primary
   * dies: a standby falling behind. Armed, the primary dies as soon as the COMMIT comes.
   */
  stallMs?: number;
  /** Point the proxy at the standby, still read-only, this long before promoting it. */
  readOnlyMs?: number;
}

export interface FailoverReport {
  from: string;
  to: string;
  /** From the primary's death to the proxy pointing at the new primary. */
  downMs: number;
  /** The armed COMMIT, when one came in time. */
  caught: CaughtCommit | undefined;
  /** COMMITs in flight (or withheld) on the connections the failover cut. */
  unknown: UnknownCommit[];
}

/**
 * A primary, a streaming standby made by pg_basebackup, and the proxies in front:
 * `proxy` is where every client connects (the stand-in for DNS / HAProxy / pgbouncer),
 * `link` carries the standby's replication connection (so it can be stalled). A
 * failover kills the primary, promotes the standby, points the proxy at it, and
 * re-seeds a new standby from it in the background; a dead primary is never started
 * again except by `readRetired`, on a port of its own, after the run.
 */
export class FailoverCluster {
  readonly retired: PgNode[] = [];
  private standby: PgNode | undefined;
  private seeding: Promise<void> | undefined;
  private nodes = 1;

  private constructor(
    readonly root: string,
    private mode: Replication,
    private primaryNode: PgNode,
    readonly proxy: PgProxy,
    readonly link: PgProxy,
    private readonly log: (line: string) => void,
  ) {}

  /** Starts the primary and its standby under `root`; resolves once the standby streams (synchronously when sync). */
  static async start(
    root: string,
    replication: Replication,
    log: (line: string) => void,
    bindir?: string,
  ): Promise<FailoverCluster> {
    fs.mkdirSync(root, { recursive: true });
    const primary = await createPrimary(root, replication, bindir);
    const proxy = await PgProxy.start(primary.state.port, { watchCommits: true });
    const link = await PgProxy.start(primary.state.port);
    const cluster = new FailoverCluster(root, replication, primary, proxy, link, log);
    await cluster.reseed();
    return cluster;
  }

  /** How the primary acknowledges COMMITs (see {@link Replication}). */
  get replication(): Replication {
    return this.mode;
  }

  /** From now on, the primary (and each promoted one) acknowledges COMMITs this way. */
  async setReplication(replication: Replication): Promise<void> {
    await setReplication(this.primaryNode, replication);
    this.mode = replication;
  }

  /** The database URL through the proxy: what the workers use. */
  get url(): string {
    return this.proxy.url(this.primaryNode.state.url);
  }

  get primary(): PgNode {
    return this.primaryNode;
  }

  /** Resolves when a standby streams again (after a failover's re-seed); throws if seeding failed. */
  async standbyReady(): Promise<PgNode> {
    await this.seeding?.catch(() => undefined);
    if (this.standby === undefined) this.startSeeding();
    await this.seeding;
    if (this.standby === undefined) throw new Error('no standby');
    return this.standby;
  }

  /** Kill (or stop) the primary, stall, read-only window, promote, retarget: see {@link FailoverOptions}. */
  async failover(o: FailoverOptions = {}): Promise<FailoverReport> {
    const standby = await this.standbyReady();
    const from = this.primaryNode;
    this.proxy.takeCutCommits(); // only the COMMITs this failover cuts
    if (o.stallMs !== undefined) this.link.stall();
    let caught: CaughtCommit | undefined;
    if (o.arm === undefined) await sleep(o.stallMs ?? 0);
    else {
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<undefined>(
        (resolve) => (timer = setTimeout(() => resolve(undefined), o.armWaitMs ?? 5000)),
      );
      caught = await Promise.race([this.proxy.armCommit(o.arm), timeout]);
      clearTimeout(timer);
      this.proxy.disarm();
    }
    const died = Date.now();
    await this.crashPrimary(o.how ?? 'kill');
    if (o.readOnlyMs !== undefined) {
      this.proxy.retarget(standby.state.port);
      await sleep(o.readOnlyMs);
    }
    const unknown = await this.promoteStandby();
    return {
      from: from.name,
      to: standby.name,
      downMs: Date.now() - died,
      caught,
      unknown,
    };
  }

  /** The primary dies (`kill`) or shuts down (`stop`); every client connection is cut. */
  async crashPrimary(how: 'kill' | 'stop'): Promise<void> {
    if (how === 'kill') await killNode(this.primaryNode);
    else await pgStop(this.primaryNode.state, 'fast');
    this.proxy.cut();
  }

  /**
   * Promotes the standby with no client connected (so no new transaction can take an
   * xid first), asks it about every COMMIT the cut left unknown, then points the
   * proxy at it and starts seeding the next standby.
   */
  async promoteStandby(): Promise<UnknownCommit[]> {
    const standby = await this.standbyReady();
    this.proxy.cut();
    const cut = this.proxy.takeCutCommits();
    this.link.unstall();
    this.link.cut();
    await promote(standby);
    await setReplication(standby, this.mode);
    const unknown: UnknownCommit[] = [];
    for (const { xid } of cut) unknown.push({ xid, status: await xactStatus(standby, xid) });
    this.retired.push(this.primaryNode);
    this.primaryNode = standby;
    this.standby = undefined;
    this.proxy.retarget(standby.state.port);
    this.link.retarget(standby.state.port);
    this.startSeeding();
    return unknown;
  }

  /** Crash (immediate stop), stay down `downMs`, start again; the proxy keeps pointing at it. */
  async restartPrimary(downMs: number): Promise<void> {
    await pgStop(this.primaryNode.state, 'immediate');
    await sleep(downMs);
    await pgStart(this.primaryNode.state);
  }

  /** Runs `sql` on every retired primary's data, each started alone on a port of its own and stopped again. */
  async readRetired<R extends object>(sql: string): Promise<Array<{ node: string; rows: R[] }>> {
    const out: Array<{ node: string; rows: R[] }> = [];
    for (const node of this.retired)
      out.push({ node: node.name, rows: await readDeadNode<R>(node, sql) });
    return out;
  }

  async stop(): Promise<void> {
    await this.seeding?.catch(() => undefined);
    await Promise.all([this.proxy.stop(), this.link.stop()]);
    for (const node of [this.primaryNode, this.standby])
      if (node !== undefined) await pgStop(node.state, 'immediate').catch(() => undefined);
  }

  /** Seeds in the background; a failure waits for whoever next needs the standby. */
  private startSeeding(): void {
    this.seeding = this.reseed();
    this.seeding.catch(() => undefined);
  }

  /**
   * A new standby from the primary, streaming (synchronously when sync). A try fails
   * when the primary crash-restarts under pg_basebackup (another nemesis): a pause, and
   * again, up to ten times.
   */
  private async reseed(): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      const name = `node-${this.nodes++}`;
      const t0 = Date.now();
      let node: PgNode | undefined;
      try {
        node = await seedStandby(this.root, name, this.primaryNode, this.link.port);
        await waitStreaming(this.primaryNode, node, () => this.mode);
        this.standby = node;
        this.log(
          `${name} streams from ${this.primaryNode.name} (${this.mode}), seeded in ${Date.now() - t0} ms`,
        );
        return;
      } catch (error) {
        if (node !== undefined) await killNode(node);
        fs.rmSync(path.join(this.root, name), { recursive: true, force: true });
        if (attempt >= 10) throw error;
        this.log(
          `seeding ${name} failed, trying again: ${String(error).split('\n').slice(0, 3).join(' ')}`,
        );
        await sleep(1000);
      }
    }
  }
}

/** `pg_xact_status` of `xid` on `node`; an xid it never saw is "in the future" there. */
async function xactStatus(node: PgNode, xid: string): Promise<XactStatus> {
  try {
    const rows = await query<{ s: string | null }>(node, 'SELECT pg_xact_status($1::xid8) AS s', [
      xid,
    ]);
    const s = rows[0]?.s;
    return s === 'committed' || s === 'aborted' || s === 'in progress' ? s : 'never replicated';
  } catch (error) {
    if (/in the future/.test(String(error))) return 'never replicated';
    throw error;
  }
}
