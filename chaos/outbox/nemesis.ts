/**
 * The outbox run's faults, fired in order at progress points (operations B applied /
 * N, `planEvents` of the broker runs): SIGKILLs of a relay, an A and a B process in
 * turn (every other relay kill armed to land right after a publish, before the marks),
 * Postgres crash-restarts, Kafka SIGKILL + restarts, and Postgres failovers (the first
 * right after an answered COMMIT, chaos/failover/plan.ts).
 */
import { sleep } from '../../src/sleep.js';
import type { FailoverReport } from '../../kit/services/cluster/cluster.js';
import { fireFailover } from '../failover/plan.js';
import type { Fleet } from '../consumer/fleet.js';
import { planEvents } from '../consumer/nemesis.js';
import type { Rng } from '../../kit/rng.js';
import type { ChaosServices } from '../../kit/services/private.js';
import type { OutboxChaosArgs } from './args.js';
import type { OutboxNodeConfig } from './shared.js';

export const ROLES = ['relay', 'a', 'b'] as const;
export type Role = (typeof ROLES)[number];

/** What the nemesis did so far. */
export interface OutboxFaults {
  kills: Record<Role, number>;
  /** Relay kills that landed between a publish and its mark. */
  relayAfterPublish: number;
  pgRestarts: number;
  brokerRestarts: number;
  /** Postgres failovers (`--failovers`), in order. */
  failovers: FailoverReport[];
}

/** Runs the planned faults; `applied()` is B's progress, read by the run's loop. */
export async function runOutboxNemesis(
  args: OutboxChaosArgs,
  rng: Rng,
  fleets: Record<Role, Fleet<OutboxNodeConfig>>,
  services: ChaosServices,
  applied: () => number,
  signal: AbortSignal,
  say: (line: string) => void,
  done: OutboxFaults,
): Promise<void> {
  const events = planEvents(
    rng,
    args.kills,
    args.pgRestarts,
    args.brokerRestarts,
    services.cluster ? args.failovers : 0,
  );
  let killIndex = 0;
  for (const event of events) {
    while (applied() < event.at * args.operations && !signal.aborted) await sleep(100);
    if (signal.aborted) return;
    if (event.kind === 'pg-restart') {
      const downMs = rng.int(500, 3000);
      say(`nemesis: Postgres crash-restart (down ${downMs} ms) at ${applied()}`);
      await services.restartPostgres(downMs);
      done.pgRestarts++;
      continue;
    }
    if (event.kind === 'failover') {
      const { report, line } = await fireFailover(services, done.failovers.length, rng);
      done.failovers.push(report);
      say(`nemesis: ${line} at ${applied()}`);
      continue;
    }
    if (event.kind === 'broker-restart') {
      const downMs = rng.int(500, 3000);
      say(`nemesis: Kafka SIGKILL + restart (down ${downMs} ms) at ${applied()}`);
      await services.restartBroker(downMs);
      done.brokerRestarts++;
      continue;
    }
    const role = ROLES[killIndex % ROLES.length] as Role;
    // Every other relay kill lands between a publish and its mark (the relay kills
    // itself there when armed; from outside if it publishes nothing for 5 s).
    const afterPublish = role === 'relay' && Math.floor(killIndex / ROLES.length) % 2 === 0;
    killIndex++;
    for (;;) {
      const ready = fleets[role].readySlots();
      if (ready.length > 0) {
        const slot = rng.pick(ready);
        const armedExit = afterPublish
          ? await fleets[role].armAndWait(slot, 'after-commit', 5000)
          : undefined;
        const exit = armedExit ?? (await fleets[role].kill(slot));
        if (exit?.signal === 'SIGKILL') {
          done.kills[role]++;
          if (armedExit !== undefined) done.relayAfterPublish++;
          const how = afterPublish
            ? armedExit !== undefined
              ? ' after a publish'
              : ' (armed, not reached: from outside)'
            : '';
          say(`nemesis: SIGKILL ${role} ${slot} (pid ${exit.pid})${how} at ${applied()}`);
          break;
        }
      }
      if (signal.aborted) return;
      await sleep(100);
    }
  }
}
