import type { FailoverReport } from '../../kit/services/cluster/cluster.js';
import {
  describeFailover,
  failoverArm,
  failoverPoints,
  failoverOptions,
  type FailoverArm,
} from '../failover/plan.js';
import type { Fleet } from './fleet.js';
import { FAULT_POINTS, type FaultPoint } from './protocol.js';
import type { Rng } from '../../kit/rng.js';
import { sleep } from '../../src/sleep.js';
import type { ChaosServices } from '../../kit/services/private.js';

export type KillMode = 'random' | FaultPoint;

/** One planned fault, fired once the run's progress (applied keys / N) reaches `at`. */
export type ChaosEvent = { at: number } & (
  | { kind: 'kill'; mode: KillMode }
  | { kind: 'pg-restart' }
  | { kind: 'broker-restart' }
  | { kind: 'failover'; arm: FailoverArm }
);

/** What actually happened. */
export interface NemesisReport {
  kills: number;
  killsByMode: Record<string, number>;
  /** Armed fault points not reached within the wait: the worker was SIGKILLed from outside instead. */
  fallbacks: number;
  pgRestarts: number;
  brokerRestarts: number;
  /** Postgres failovers (chaos/failover/), in order. */
  failovers: FailoverReport[];
  log: string[];
}

/** How long an armed worker may take to reach its fault point before it is killed from outside. */
const ARM_WAIT_MS = 5000;

/**
 * K kills (modes spread evenly over random, after-commit, in-handler, during-ack, in
 * random order) at random progress points, one in each K-th of 3 %..85 % of the run;
 * Postgres restarts in 25..55 %, broker restarts in 50..80 %. Events are fired one at
 * a time, in order.
 */
export function planEvents(
  rng: Rng,
  kills: number,
  pgRestarts: number,
  brokerRestarts: number,
  failovers = 0,
): ChaosEvent[] {
  const modes: KillMode[] = ['random', ...FAULT_POINTS];
  const killModes = rng.shuffle(
    Array.from({ length: kills }, (_, i) => modes[i % modes.length] as KillMode),
  );
  // Stratified: kill i lands somewhere in the i-th of K equal slices of the window, so
  // even a handful of kills is spread over the run.
  const slice = (0.85 - 0.03) / Math.max(1, kills);
  const events: ChaosEvent[] = killModes.map((mode, i) => ({
    at: 0.03 + slice * (i + rng.next()),
    kind: 'kill',
    mode,
  }));
  for (let i = 0; i < pgRestarts; i++)
    events.push({ at: rng.between(0.25, 0.55), kind: 'pg-restart' });
  for (let i = 0; i < brokerRestarts; i++)
    events.push({ at: rng.between(0.5, 0.8), kind: 'broker-restart' });
  // Stratified over 10..80 %; the first is armed at an answered COMMIT, then each arm in turn.
  failoverPoints(rng, failovers).forEach((at, i) =>
    events.push({ at, kind: 'failover', arm: failoverArm(i) }),
  );
  return events.sort((a, b) => a.at - b.at);
}

export class Nemesis {
  readonly report: NemesisReport = {
    kills: 0,
    killsByMode: {},
    fallbacks: 0,
    pgRestarts: 0,
    brokerRestarts: 0,
    failovers: [],
    log: [],
  };

  constructor(
    private readonly events: ChaosEvent[],
    private readonly fleet: Fleet,
    private readonly services: ChaosServices,
    private readonly rng: Rng,
    private readonly say: (line: string) => void,
  ) {}

  /** Fires every event when `progress()` (0..1) reaches it; resolves when all have fired. */
  async run(progress: () => number, signal: AbortSignal): Promise<void> {
    for (const event of this.events) {
      while (progress() < event.at && !signal.aborted) await sleep(50);
      if (signal.aborted) return;
      const started = Date.now();
      const what = await this.fire(event, signal);
      const line = `${(progress() * 100).toFixed(0).padStart(3)}% ${what} (${Date.now() - started} ms)`;
      this.report.log.push(line);
      this.say(line);
    }
  }

  private async fire(event: ChaosEvent, signal: AbortSignal): Promise<string> {
    switch (event.kind) {
      case 'pg-restart': {
        const downMs = this.rng.int(500, 3000);
        await this.services.restartPostgres(downMs);
        this.report.pgRestarts++;
        return `Postgres crash-restarted (down ${downMs} ms)`;
      }
      case 'broker-restart': {
        const downMs = this.rng.int(1000, 3000);
        await this.services.restartBroker(downMs);
        this.report.brokerRestarts++;
        return `broker SIGKILLed and restarted (down ${downMs} ms)`;
      }
      case 'kill':
        return this.kill(event.mode, signal);
      case 'failover': {
        const report = await this.services.failover(failoverOptions(event.arm, this.rng));
        this.report.failovers.push(report);
        return describeFailover(report);
      }
    }
  }

  /** Kills one worker in `mode`; tries again (up to 3 times) when the worker died of something else first. */
  private async kill(mode: KillMode, signal: AbortSignal): Promise<string> {
    const lines: string[] = [];
    for (let attempt = 0; attempt < 3 && !signal.aborted; attempt++) {
      const outcome = await this.killOnce(mode, signal);
      lines.push(outcome.line);
      if (outcome.killed) break;
    }
    return lines.join('; ');
  }

  private async killOnce(
    mode: KillMode,
    signal: AbortSignal,
  ): Promise<{ killed: boolean; line: string }> {
    let ready = this.fleet.readySlots();
    while (ready.length === 0 && !signal.aborted) {
      await sleep(100);
      ready = this.fleet.readySlots();
    }
    if (signal.aborted) return { killed: false, line: 'aborted' };
    const slot = this.rng.pick(ready);
    if (mode === 'random') {
      await sleep(this.rng.int(0, 300));
      const exit = await this.fleet.kill(slot);
      return this.count(
        exit?.signal === 'SIGKILL',
        'random',
        `worker ${slot} SIGKILLed at a random moment`,
      );
    }
    const exit = await this.fleet.armAndWait(slot, mode, ARM_WAIT_MS);
    if (exit?.signal === 'SIGKILL' && exit.armed === mode) {
      return this.count(true, mode, `worker ${slot} SIGKILLed itself at ${mode}`);
    }
    if (exit !== undefined)
      return {
        killed: false,
        line: `worker ${slot} exited (code ${exit.code}) while armed at ${mode}`,
      };
    const killed = await this.fleet.kill(slot);
    if (killed?.signal === 'SIGKILL') this.report.fallbacks++;
    return this.count(
      killed?.signal === 'SIGKILL',
      'random',
      `worker ${slot} did not reach ${mode} within ${ARM_WAIT_MS} ms: SIGKILLed from outside`,
    );
  }

  private count(killed: boolean, mode: KillMode, line: string): { killed: boolean; line: string } {
    if (!killed) return { killed, line: `${line}: it was already gone` };
    this.report.kills++;
    this.report.killsByMode[mode] = (this.report.killsByMode[mode] ?? 0) + 1;
    return { killed, line };
  }
}
