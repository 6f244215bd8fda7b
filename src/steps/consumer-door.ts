/** The consumer door: a flow as a `createConsumer` handler. */
import { checkScope } from '../http/options.js';
import type { Handler } from '../types.js';
import type { Flow, FlowHandlerOptions, FlowRunner } from './types.js';

/**
 * A `createConsumer` handler that drives `flow` for each message, keyed by the message's
 * dedup key: the handler returns (and the message is acked once its claim commits) only
 * when the flow's final answer is stored; a redelivery resumes after the last recorded
 * step, or finds the answer and returns at once. A live owner elsewhere (`EO_CLAIM_BUSY`),
 * a transient step failure (`EO_STEP_FAILED`) or a stale owner (`EO_FLOW_FENCED`) throw
 * a retryable error: the message is retried later (each spends an attempt: give
 * `maxAttempts` room). A key reused with another input, or steps that changed, throw a
 * non-retryable one (dead-lettered). The flow's steps run on the runner's pool, beside
 * the claim's own transaction (`ctx.tx` is not used): size the pool for both.
 *
 * ```ts
 * const runner = createFlowRunner({ pool });
 * createConsumer({ pool, source, consumer: 'charges', handler: flowHandler(runner, charge) });
 * ```
 */
export function flowHandler<T, I = T>(
  runner: FlowRunner,
  flow: Flow<I>,
  options: FlowHandlerOptions<T, I> = {},
): Handler<T> {
  const scope = checkScope(options.scope ?? 'consumer');
  return async (message, ctx) => {
    const input = options.input === undefined ? (message as unknown as I) : options.input(message);
    const outcome = await runner.run(flow, {
      scope,
      key: ctx.key,
      input,
      origin: 'consumer',
      signal: ctx.signal,
    });
    if (outcome.kind !== 'answered') throw outcome.error;
  };
}
