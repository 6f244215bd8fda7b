import type pg from 'pg';
import { sleep } from '../../src/sleep.js';
import type { FailoverReport } from '../../kit/services/cluster/cluster.js';
import { failoverPoints, fireFailover } from '../failover/plan.js';
import type { Rng } from '../../kit/rng.js';
import type { ChaosServices } from '../../kit/services/private.js';
import type { HttpChaosArgs } from './args.js';
import { SERVER_APPLICATION } from './server.js';

/**
 * Postgres faults at spread-out moments of the run (commit counts below N):
 * `pg_terminate_backend` of every connection the server holds, crash-restarts, and
 * failovers (`--failovers`: stratified over 10..80 % of N, the first right after an
 * answered COMMIT, chaos/failover/plan.ts).
 */
export class DatabaseNemesis {
  terminations = 0;
  /** Server backends terminated over all terminations. */
  backends = 0;
  restarts = 0;
  readonly failovers: FailoverReport[] = [];
  private readonly events: Array<{ kind: 'terminate' | 'restart' | 'failover'; at: number }>;

  constructor(
    private readonly rng: Rng,
    args: Pick<HttpChaosArgs, 'payments' | 'pgTerminations' | 'pgRestarts' | 'failovers'>,
    private readonly services: ChaosServices,
    private readonly pool: pg.Pool,
    private readonly committed: () => number,
    private readonly say: (line: string) => void,
  ) {
    const at = (): number => Math.floor(args.payments * rng.between(0.05, 0.9));
    this.events = [
      ...Array.from({ length: args.pgTerminations }, () => ({
        kind: 'terminate' as const,
        at: at(),
      })),
      ...Array.from({ length: services.canRestartPostgres ? args.pgRestarts : 0 }, () => ({
        kind: 'restart' as const,
        at: at(),
      })),
      ...failoverPoints(rng, services.cluster ? args.failovers : 0).map((share) => ({
        kind: 'failover' as const,
        at: Math.floor(args.payments * share),
      })),
    ].sort((a, b) => a.at - b.at);
  }

  async run(signal: AbortSignal): Promise<void> {
    for (const event of this.events) {
      while (!signal.aborted && this.committed() < event.at) await sleep(20);
      if (signal.aborted) return;
      if (event.kind === 'failover') {
        const { report, line } = await fireFailover(this.services, this.failovers.length, this.rng);
        this.failovers.push(report);
        this.say(`nemesis: ${line} at ${this.committed()} commits`);
        continue;
      }
      if (event.kind === 'restart') {
        const downMs = Math.round(this.rng.between(500, 2000));
        this.say(
          `nemesis: Postgres crash-restart (down ${downMs} ms) at ${this.committed()} commits`,
        );
        await this.services.restartPostgres(downMs);
        this.restarts++;
        continue;
      }
      // The server may be between incarnations: wait until it holds connections again.
      for (let tries = 0; tries < 100 && !signal.aborted; tries++) {
        const n = await this.terminate().catch(() => 0);
        if (n > 0) {
          this.terminations++;
          this.backends += n;
          this.say(`nemesis: terminated ${n} server backend(s) at ${this.committed()} commits`);
          break;
        }
        await sleep(50);
      }
    }
  }

  private async terminate(): Promise<number> {
    const { rows } = await this.pool.query<{ n: number }>(
      `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid))::int AS n
         FROM pg_stat_activity WHERE application_name = $1`,
      [SERVER_APPLICATION],
    );
    return rows[0]?.n ?? 0;
  }
}
