/**
 * A chaos worker in Lambda mode (`--lambda`): the process is one execution environment
 * with the event source mapping in front of it. The function is `lambdaConsumer` from
 * `effectively-once/lambda`, created once (a warm environment keeps it and its pool
 * across invocations); kit/lambda's `EventSourceMapping` receives from the queue, invokes
 * it in this process and deletes only what the answer does not list. A SIGKILL of the
 * worker ends the function mid-batch and the mapping with it, which Lambda answers the
 * same way: a failed invocation deletes nothing, the batch comes back after the
 * visibility timeout, and the restarted worker is a cold start.
 */
import { SQSClient } from '@aws-sdk/client-sqs';
import type { SQSRecord } from 'aws-lambda';
import type { Consumer, ConsumerOptions, HandlerContext } from 'effectively-once';
import { lambdaConsumer } from 'effectively-once/lambda';
import { EventSourceMapping } from '../../kit/lambda/event-source-mapping.js';
import { InProcessInvoker } from '../../kit/lambda/invoker.js';
import { armSqsDeletes, type Faults } from './faults.js';
import type { ChaosBody } from './plan.js';

/** Records per invocation, Lambda's default `BatchSize` for SQS. */
const BATCH_SIZE = 10;
/**
 * The function's timeout: below the queue's 5 s visibility timeout (AWS asks for a
 * visibility timeout of at least the function's), so an invocation ends before its
 * records can be received again.
 */
const FUNCTION_TIMEOUT_MS = 4_000;

/** The worker's view of its function: the consumer behind it, started and stopped with the mapping. */
export interface LambdaHost {
  readonly consumer: Consumer;
  start(): Promise<void>;
  stop(): Promise<void>;
}

export interface LambdaHostOptions {
  /** The consumer's options (no source, no handler: the mapping feeds it). */
  common: Omit<ConsumerOptions<SQSRecord>, 'source' | 'handler' | 'batchHandler' | 'batch'>;
  endpoint: string;
  queueUrl: string;
  faults: Faults;
  /** The chaos handler, given the record's body decoded. */
  handler: (body: ChaosBody, ctx: HandlerContext<SQSRecord>) => Promise<void>;
}

export function lambdaHost(o: LambdaHostOptions): LambdaHost {
  const fn = lambdaConsumer({
    ...o.common,
    key: 'Idempotency-Key',
    // A body that is not JSON throws here, in the handler: the record fails every time
    // and the queue's redrive policy moves it to the dead-letter queue.
    handler: (record, ctx) => o.handler(JSON.parse(record.body) as ChaosBody, ctx),
  });
  const client = new SQSClient({
    region: 'us-east-1',
    endpoint: o.endpoint,
    credentials: { accessKeyId: 'chaos', secretAccessKey: 'chaos' },
  });
  // `during-ack`: the mapping's DeleteMessageBatch after the function answered.
  armSqsDeletes(client, o.faults);
  const mapping = new EventSourceMapping({
    client,
    queueUrl: o.queueUrl,
    invoker: new InProcessInvoker(fn),
    batchSize: BATCH_SIZE,
    functionTimeoutMs: FUNCTION_TIMEOUT_MS,
  });
  return {
    consumer: fn.consumer,
    async start() {
      // The init phase: the dedup table's migration, as a module-scope `start()` would.
      await fn.start();
      mapping.start();
    },
    async stop() {
      await mapping.stop();
      await fn.consumer.stop({ timeoutMs: 10_000 });
      client.destroy();
    },
  };
}
