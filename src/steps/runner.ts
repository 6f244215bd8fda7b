/** Runs flows on one flows table: claim or take over, replay, run the rest, store the answer. */
import type { Flow, FlowOutcome, FlowRunner, FlowStart, FlowStoreOptions } from './types.js';

/**
 * A runner of flows on one flows table (default `public.eo_flows`). The doors make
 * their own; use one directly to drive a flow from anything else (a job, a script).
 */
export function createFlowRunner(options: FlowStoreOptions): FlowRunner {
  void options;
  return {
    run: <I>(_flow: Flow<I>, _start: FlowStart<I>): Promise<FlowOutcome> => {
      throw new Error('not yet');
    },
    migrate: () => Promise.reject(new Error('not yet')),
  };
}
