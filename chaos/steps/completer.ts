import pg from 'pg';
import { createStepsCompleter } from 'effectively-once';
import { sleep } from '../../src/sleep.js';
import { chaosOrderFlow } from './flow.js';

export interface FinishOptions {
  databaseUrl: string;
  schema: string;
  /** The provider, straight (no faults of the proxy's). */
  providerUrl: string;
  leaseMs: number;
  callTimeoutMs: number;
  /** Gives up then, leaving what is unfinished to the verdict. */
  deadline: number;
  countUnfinished(): Promise<number>;
  say(line: string): void;
}

/**
 * The final completer pass, as an operator's CLI run would be: the chaos flow's completer
 * in this process, one pass after another, until no key row is unfinished (each waits
 * for an expired lease: the killed server's, the abandoned clients', the one the last
 * server incarnation's completer may still hold) or the deadline. Resolves with the
 * flows it drove to their answer.
 */
export async function finishFlows(options: FinishOptions): Promise<number> {
  const pool = new pg.Pool({
    connectionString: options.databaseUrl,
    options: `-c search_path=${options.schema}`,
    max: 8,
  });
  pool.on('error', () => undefined);
  const flow = chaosOrderFlow({
    providerUrl: options.providerUrl,
    callTimeoutMs: options.callTimeoutMs,
    boundary: () => undefined,
  });
  const completer = createStepsCompleter({
    pool,
    schema: options.schema,
    flows: [flow],
    leaseMs: options.leaseMs,
    batchSize: 200,
  });
  let finished = 0;
  try {
    for (;;) {
      const left = await options.countUnfinished();
      if (left === 0) return finished;
      if (Date.now() > options.deadline) {
        options.say(`final completer: ${left} flow(s) still unfinished at its deadline`);
        return finished;
      }
      try {
        finished += await completer.runOnce();
      } catch (error) {
        options.say(`final completer pass failed: ${String(error)}`);
      }
      await sleep(Math.min(500, options.leaseMs / 2));
    }
  } finally {
    await completer.stop();
    await pool.end();
  }
}
