import { fileURLToPath } from 'node:url';
import { sleep } from '../../src/sleep.js';
import type { Framework } from '../../kit/payments/payments.js';
import { spawnPaymentServer, type PaymentProcess } from '../../kit/payments/spawn.js';
import type { Rng } from '../../kit/rng.js';
import type { DataLayerName } from '../../kit/data-layers/index.js';

/** How a server incarnation is killed. */
export type KillMode = 'after-commit' | 'random';

/** One planned kill: the incarnation's commits before it dies, and how. */
export interface PlannedKill {
  mode: KillMode;
  /** after-commit: it SIGKILLs itself right after this COMMIT; random: killed from outside after it. */
  afterCommits: number;
}

/** The application_name of the server's connections: what a termination targets. */
export const SERVER_APPLICATION = 'eo-chaos-http-server';

/**
 * K kills alternating between the two modes, each after a random share of N/(K+1)
 * commits (at least 1), so their sum stays below N: every planned kill can happen.
 */
export function planKills(rng: Rng, kills: number, payments: number): PlannedKill[] {
  const slice = payments / (kills + 1);
  return Array.from({ length: kills }, (_, i) => ({
    mode: i % 2 === 0 ? 'after-commit' : 'random',
    afterCommits: Math.max(1, Math.floor(slice * rng.between(0.4, 1))),
  }));
}

export interface SupervisorOptions {
  framework: Framework;
  /** What the payment handler writes through (child.ts; `pg`: the payment API as it is). */
  dataLayer: DataLayerName;
  databaseUrl: string;
  schema: string;
  kills: PlannedKill[];
  /** The handler-fault routes' port (child.ts), the same for every incarnation; 0: none. */
  faultPort: number;
  /** Another server script speaking kit/payments' child protocol (default ./child.ts). */
  entry?: string;
  /** More environment for every incarnation. */
  env?: Record<string, string>;
  rng: Rng;
  log: (line: string) => void;
}

/**
 * The payment server as a supervisor runs it: one child process at a time
 * (child.ts: the payment API and the handler-fault routes), each incarnation ended by its planned kill and
 * replaced 0.1-1 s later on the same port, as a process manager would; the last one
 * runs until `stop()`.
 */
export class ServerSupervisor {
  /** Kills done, by mode; `fallbacks`: armed ones not reached in time, killed from outside. */
  readonly killed = { 'after-commit': 0, random: 0, fallbacks: 0 };
  /** Incarnations started, and starts that failed (Postgres down, say). */
  spawned = 0;
  failedStarts = 0;
  /** Incarnations that ended other than by a planned SIGKILL or the final stop. */
  crashes = 0;
  private readonly incarnations: PaymentProcess[] = [];
  private current: PaymentProcess | undefined;
  private stopping = false;
  private loop: Promise<void> | undefined;
  private port = 0;

  constructor(private readonly options: SupervisorOptions) {}

  /** Keys committed so far, over every incarnation. */
  committed(): number {
    return this.incarnations.reduce((n, p) => n + p.committed.length, 0);
  }

  /** The event lines of type `t` (counted by their `n`) over every incarnation. */
  tally(t: string): number {
    return this.incarnations.reduce((n, p) => n + p.tally(t), 0);
  }

  /** Starts the first incarnation; resolves with its port (every later one reuses it). */
  async start(): Promise<number> {
    const first = await this.spawn(this.options.kills[0]);
    this.loop = this.supervise(first);
    return this.port;
  }

  /** Stops the last incarnation gracefully (the loop ends at once when asked). */
  async stop(): Promise<void> {
    this.stopping = true;
    await this.loop;
    await this.current?.stop();
  }

  /** Resolves when every planned kill happened (or the supervisor is stopping). */
  killsDone(): Promise<void> {
    return this.allKilled;
  }

  private markAllKilled: () => void = () => undefined;
  private readonly allKilled = new Promise<void>((resolve) => (this.markAllKilled = resolve));

  /**
   * Ends each incarnation as planned and starts the next; an incarnation that died on
   * its own (a crash: not a SIGKILL) is counted, and replaced with the same kill
   * still planned. Once the plan is done, the last one is watched the same way.
   */
  private async supervise(first: PaymentProcess): Promise<void> {
    let running = first;
    let next = 0;
    while (!this.stopping) {
      const kill = this.options.kills[next];
      if (kill === undefined) this.markAllKilled();
      const how = await this.end(running, kill);
      if (how === 'stopping') break;
      if (how === 'killed') next++;
      await sleep(this.options.rng.between(100, 1000));
      if (this.stopping) break;
      running = await this.spawn(this.options.kills[next]);
    }
    this.markAllKilled();
  }

  /** Waits for the incarnation's planned end, making it happen from outside if need be. */
  private async end(
    process: PaymentProcess,
    kill: PlannedKill | undefined,
  ): Promise<'killed' | 'crashed' | 'stopping'> {
    const { log } = this.options;
    const exitedWithin = (ms: number) =>
      Promise.race([process.exited, sleep(ms).then(() => undefined)]);
    const giveUpAt = Date.now() + 30_000;
    for (;;) {
      if (this.stopping) return 'stopping';
      const reached = kill !== undefined && process.committed.length >= kill.afterCommits;
      if (reached || (kill !== undefined && Date.now() > giveUpAt)) break;
      if ((await exitedWithin(20)) !== undefined) break;
    }
    // Armed and reached: it kills itself right after printing that COMMIT.
    const reached = kill !== undefined && process.committed.length >= kill.afterCommits;
    const how = await exitedWithin(kill?.mode === 'after-commit' && reached ? 5000 : 0);
    if (how !== undefined && how !== 'SIGKILL') return 'crashed';
    if (kill === undefined) return 'stopping';
    if (kill.mode === 'after-commit' && how === 'SIGKILL') {
      this.killed['after-commit']++;
      log(
        `server killed itself right after COMMIT #${process.committed.length} (${process.committed.at(-1)}), before its response`,
      );
      return 'killed';
    }
    if (this.stopping) return 'stopping';
    // A random moment: whatever requests are in flight, before or after their COMMIT.
    await sleep(this.options.rng.between(0, 30));
    await process.kill();
    this.killed.random++;
    if (kill.mode === 'random')
      log(`server SIGKILLed at a random moment after ${process.committed.length} commits`);
    else {
      this.killed.fallbacks++;
      log('armed after-commit kill not reached in 30 s: SIGKILLed from outside');
    }
    return 'killed';
  }

  /** A new incarnation on the same port, armed for `next` when it is an after-commit kill. */
  private async spawn(next: PlannedKill | undefined): Promise<PaymentProcess> {
    for (;;) {
      const process = spawnPaymentServer({
        framework: this.options.framework,
        databaseUrl: withApplicationName(this.options.databaseUrl),
        schema: this.options.schema,
        port: this.port,
        killAfterCommits: next?.mode === 'after-commit' ? next.afterCommits : 0,
        entry: this.options.entry ?? fileURLToPath(new URL('./child.ts', import.meta.url)),
        env: {
          EO_CHAOS_FAULT_PORT: String(this.options.faultPort),
          ...(this.options.dataLayer === 'pg'
            ? {}
            : { EO_CHAOS_DATA_LAYER: this.options.dataLayer }),
          ...this.options.env,
        },
      });
      this.spawned++;
      this.incarnations.push(process);
      void process.exited.then((how) => {
        if (how !== 'SIGKILL' && !this.stopping) {
          this.crashes++;
          this.options.log(
            `SERVER CRASHED (exit ${how}), restarting it; its stderr:\n${process.stderr()}`,
          );
        }
      });
      this.current = process;
      try {
        this.port = await process.ready;
        return process;
      } catch (error) {
        // Postgres restarting, the port still held: try again, as a supervisor would.
        this.failedStarts++;
        this.options.log(`server start failed, retrying: ${String(error).split('\n')[0]}`);
        await sleep(500);
      }
    }
  }
}

function withApplicationName(url: string): string {
  const parsed = new URL(url);
  parsed.searchParams.set('application_name', SERVER_APPLICATION);
  return parsed.toString();
}
