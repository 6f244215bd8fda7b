/**
 * Entry point of a pre-fill process (forked by prefill.ts from a scenario process):
 * fills one topic or queue, then exits.
 */
import type { PrefillRequest } from './prefill.js';

/** Progress lines only for fills long enough to wonder about. */
const REPORT_FROM = 200_000;

async function fill(request: PrefillRequest): Promise<void> {
  const started = performance.now();
  const progress = (sent: number): void => {
    if (request.messages < REPORT_FROM) return;
    const s = Math.round((performance.now() - started) / 1000);
    console.log(
      `[bench] pre-fill: ${sent.toLocaleString('en-US')} / ${request.messages.toLocaleString('en-US')} (${s} s)`,
    );
  };
  if (request.broker === 'kafka') {
    const { fillTopic, kafkaClient } = await import('./kafka/topic.js');
    await fillTopic(
      kafkaClient(request.brokers),
      request.topic,
      request.partitions,
      request.messages,
      {
        onProgress: progress,
      },
    );
  } else if (request.broker === 'rabbitmq') {
    const { fillQueue } = await import('./rabbitmq/queue.js');
    await fillQueue(request.url, request.queue, request.messages);
  } else {
    const { fillQueue, sqsClient } = await import('./sqs/queue.js');
    const client = sqsClient(request.endpoint);
    try {
      await fillQueue(client, request.queueUrl, request.messages);
    } finally {
      client.destroy();
    }
  }
}

// Dies with the scenario process (a timeout kills it) instead of producing on for nobody.
process.once('disconnect', () => process.exit(1));
process.once('message', (request: PrefillRequest) => {
  fill(request).then(
    () => process.exit(0),
    (error: unknown) => {
      console.error('[bench] pre-fill failed:', error);
      process.exit(1);
    },
  );
});
