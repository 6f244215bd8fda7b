import type { ChaosArgs } from './args.js';
import { sleep } from '../../src/sleep.js';
import type { ChaosBroker } from './broker-api.js';
import type { Send } from './plan.js';

/**
 * Sends per second when `--rate` is not given: the sends are spread over enough time
 * for the planned faults to land while messages are flowing (about 2 s per kill, 4 s
 * with Kafka where each kill costs a rebalance, 8 s per restart, at least 8 s). A
 * consumer slower than that simply lags behind; progress, not the clock, fires faults.
 */
export function defaultRate(args: ChaosArgs, sends: number): number {
  const perKill = args.broker === 'kafka' ? 4 : 2;
  const seconds = Math.max(8, perKill * args.kills + 8 * (args.pgRestarts + args.brokerRestarts));
  return Math.max(1, Math.ceil(sends / seconds));
}

/** Sends `sends` at `rate` per second (0: all at once), in quarter-second chunks. */
export async function produce(
  broker: ChaosBroker,
  sends: Send[],
  rate: number,
  signal: AbortSignal,
): Promise<{ resent: number }> {
  if (rate === 0) return broker.send(sends, signal);
  const chunk = Math.max(1, Math.ceil(rate / 4));
  const started = Date.now();
  let resent = 0;
  for (let i = 0; i < sends.length && !signal.aborted; i += chunk) {
    const due = started + (i / rate) * 1000;
    if (due > Date.now()) await sleep(due - Date.now());
    resent += (await broker.send(sends.slice(i, i + chunk), signal)).resent;
  }
  return { resent };
}
