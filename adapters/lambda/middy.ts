import type { MiddlewareObj, Request } from '@middy/core';
import type { Context, SQSBatchItemFailure, SQSBatchResponse, SQSEvent } from 'aws-lambda';
import type { PoolClient } from 'pg';
import type { Consumer } from '../../src/consumer/types.js';
import { describe } from '../../src/errors.js';
import { LambdaRunner } from './consumer.js';
import { lambdaSettings, type LambdaConsumerOptions } from './options.js';

/** The Middy middleware of {@link lambdaConsumerMiddleware}, with the consumer behind it. */
export interface LambdaConsumerMiddleware extends MiddlewareObj<
  SQSEvent,
  SQSBatchResponse | void,
  Error,
  Context
> {
  /** The consumer behind it: events (`processed`, `duplicate`, `failed`...) and `stats()`. */
  readonly consumer: Consumer;
}

/**
 * {@link lambdaConsumer} as a Middy middleware, for handlers composed with `@middy/core`:
 * `before` runs every record of the event through `options.handler` (each claimed and
 * committed in its own transaction, as `lambdaConsumer` does); the base handler runs
 * after it (it may be left out) and may answer failures of its own; `after` sets
 * `request.response` to the partial batch response, its failures and the base handler's.
 * When the base handler or a later middleware throws, `onError` answers the records'
 * own verdicts (what committed is deleted, not redelivered) and logs the error.
 *
 * ```ts
 * export const handler = middy<SQSEvent, SQSBatchResponse | void>()
 *   .use(lambdaConsumerMiddleware({ name: 'orders', pool, handler: applyOrder }));
 * ```
 */
export function lambdaConsumerMiddleware<Tx = PoolClient>(
  options: LambdaConsumerOptions<Tx>,
): LambdaConsumerMiddleware {
  const runner = new LambdaRunner(
    lambdaSettings(options as LambdaConsumerOptions<unknown>),
    options,
  );
  // Per request: Middy's `request.internal` may be shared between requests (a plugin's).
  const answers = new WeakMap<object, SQSBatchResponse>();
  type SqsRequest = Request<SQSEvent, SQSBatchResponse | void, Error, Context>;
  return {
    consumer: runner.consumer,
    before: async (request: SqsRequest) => {
      answers.set(request, await runner.run(request.event, request.context));
    },
    after: (request: SqsRequest) => {
      const ours = answers.get(request);
      if (ours === undefined) return;
      request.response = merged(ours, request.response);
    },
    onError: (request: SqsRequest) => {
      const ours = answers.get(request);
      // Our `before` failed (the consumer could not start): Lambda returns the whole batch.
      if (ours === undefined || request.response !== undefined) return;
      (options.logger ?? console).error(
        { consumer: options.name, error: describe(request.error) },
        'effectively-once: the Lambda handler threw after the records were settled; answering their own verdicts',
      );
      request.response = ours;
    },
  };
}

/** Our failures and those the base handler answered, each once. */
function merged(ours: SQSBatchResponse, theirs: SQSBatchResponse | void | null): SQSBatchResponse {
  const extra: readonly SQSBatchItemFailure[] = theirs?.batchItemFailures ?? [];
  if (extra.length === 0) return ours;
  const seen = new Set(ours.batchItemFailures.map((f) => f.itemIdentifier));
  const all = [...ours.batchItemFailures];
  for (const f of extra) if (!seen.has(f.itemIdentifier)) all.push(f);
  return { batchItemFailures: all };
}
