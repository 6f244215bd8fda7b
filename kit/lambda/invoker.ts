import type { Context, SQSBatchResponse, SQSEvent } from 'aws-lambda';

/** How one invocation ended, as the event source mapping sees it. */
export type Invocation =
  | { kind: 'answered'; response: unknown }
  /** Threw, timed out, or its execution environment died: the whole batch failed. */
  | { kind: 'failed'; reason: string };

/** Runs the function for one event, within its timeout. */
export interface Invoker {
  invoke(event: SQSEvent, timeoutMs: number): Promise<Invocation>;
  /** Ends what the invoker started (a child process). */
  close(): Promise<void>;
}

/** The SQS handler shape the invokers call. */
export type SqsFunction = (event: SQSEvent, context: Context) => Promise<SQSBatchResponse | void>;

/**
 * A Lambda `Context` for an invocation ending at `deadline` (ms since the epoch): what the
 * library reads of it is `getRemainingTimeInMillis()`.
 */
export function invocationContext(deadline: number, functionName = 'eo-test'): Context {
  return {
    callbackWaitsForEmptyEventLoop: true,
    functionName,
    functionVersion: '$LATEST',
    invokedFunctionArn: `arn:aws:lambda:us-east-1:000000000000:function:${functionName}`,
    memoryLimitInMB: '128',
    awsRequestId: `req-${Math.random().toString(16).slice(2)}`,
    logGroupName: `/aws/lambda/${functionName}`,
    logStreamName: 'emulated',
    getRemainingTimeInMillis: () => Math.max(0, deadline - Date.now()),
    done: () => undefined,
    fail: () => undefined,
    succeed: () => undefined,
  };
}

/**
 * Calls the handler in this process. A timeout answers `failed` as Lambda would, but the
 * handler goes on running (nothing here can freeze or kill it): kill tests use
 * {@link ChildInvoker}.
 */
export class InProcessInvoker implements Invoker {
  constructor(private readonly fn: SqsFunction) {}

  async invoke(event: SQSEvent, timeoutMs: number): Promise<Invocation> {
    const deadline = Date.now() + timeoutMs;
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<Invocation>((resolve) => {
      timer = setTimeout(
        () => resolve({ kind: 'failed', reason: `timed out after ${timeoutMs} ms` }),
        timeoutMs,
      );
    });
    const answered = this.fn(event, invocationContext(deadline)).then(
      (response): Invocation => ({ kind: 'answered', response }),
      (error: unknown): Invocation => ({ kind: 'failed', reason: `threw: ${String(error)}` }),
    );
    try {
      return await Promise.race([answered, timedOut]);
    } finally {
      clearTimeout(timer);
    }
  }

  async close(): Promise<void> {}
}
