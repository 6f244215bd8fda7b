/** The completer: finishes flows whose owner's lease expired, with their recorded input. */
import { ConfigurationError, StateError } from '../errors.js';
import { silentLogger } from '../logger.js';
import { sleep } from '../sleep.js';
import { Runner } from './runner.js';
import type { Flow, StepsCompleter, StepsCompleterOptions } from './types.js';

/**
 * Finishes abandoned flows in the background: every `intervalMs`, the unfinished flows
 * of `flows` whose lease expired are taken over (fence + 1) and driven to their final
 * answer with the recorded input, so a client that never retries still gets its effect
 * recorded consistently. Run it in one or more processes (each flow has one owner at a
 * time: the takeover is one fenced UPDATE), or once from a job with `runOnce()`.
 */
export function createStepsCompleter(options: StepsCompleterOptions): StepsCompleter {
  const flows = new Map<string, Flow<unknown>>();
  if (!Array.isArray(options?.flows) || options.flows.length === 0)
    throw new ConfigurationError('flows', 'must list at least one flow');
  for (const flow of options.flows as ReadonlyArray<Flow<unknown>>) {
    if (flows.has(flow.name))
      throw new ConfigurationError('flows', `lists flow "${flow.name}" twice`);
    flows.set(flow.name, flow);
  }
  const intervalMs = options.intervalMs ?? 5_000;
  const batchSize = options.batchSize ?? 50;
  if (!Number.isInteger(batchSize) || batchSize < 1)
    throw new ConfigurationError('batchSize', 'must be a positive integer');
  if (!Number.isFinite(intervalMs) || intervalMs < 1)
    throw new ConfigurationError('intervalMs', 'must be a positive number of ms');
  const runner = new Runner(options);
  const logger = options.logger ?? silentLogger;
  const stopping = new AbortController();
  let loop: Promise<void> | undefined;

  const runOnce = async (signal: AbortSignal = stopping.signal): Promise<number> => {
    const candidates = await runner.abandoned([...flows.keys()], batchSize);
    let finished = 0;
    for (const candidate of candidates) {
      if (signal.aborted) break;
      const flow = flows.get(candidate.flow);
      if (flow === undefined) continue;
      const outcome = await runner.resume(flow, candidate.scope, candidate.key, signal);
      if (outcome?.kind === 'answered' && !outcome.replayed) finished++;
      else if (outcome !== undefined && outcome.kind !== 'answered')
        logger.warn(
          { err: outcome.kind === 'busy' ? undefined : outcome.error, key: candidate.key },
          `effectively-once: the completer left flow "${flow.name}" unfinished (${outcome.kind})`,
        );
    }
    return finished;
  };

  return {
    start: () => {
      if (loop !== undefined) throw new StateError('the completer is already started');
      loop = (async () => {
        while (!stopping.signal.aborted) {
          try {
            await runOnce(stopping.signal);
          } catch (err) {
            logger.warn({ err }, 'effectively-once: a completer pass failed');
          }
          await sleep(intervalMs, stopping.signal);
        }
      })();
    },
    runOnce,
    stop: async () => {
      stopping.abort();
      await loop;
    },
  };
}
