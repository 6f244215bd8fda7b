/** The consumer door: a flow as a `createConsumer` handler. */
import type { Handler } from '../types.js';
import type { Flow, FlowHandlerOptions, FlowRunner } from './types.js';

/**
 * A `createConsumer` handler that drives `flow` for each message, keyed by the message's
 * dedup key: the handler returns (and the message is acked after its claim commits) only
 * once the flow's final answer is stored; a redelivery resumes after the last recorded
 * step, or finds the answer and is acked. A live owner elsewhere, a transient step
 * failure or a stale owner throw a retryable error: the message is retried later.
 */
export function flowHandler<T, I = T>(
  runner: FlowRunner,
  flow: Flow<I>,
  options: FlowHandlerOptions<T, I> = {},
): Handler<T> {
  void runner;
  void flow;
  void options;
  throw new Error('not yet');
}
