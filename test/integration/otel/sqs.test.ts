/**
 * otelTelemetry() on an sqsSource against the SQS emulator: a `traceparent` message
 * attribute makes the delivery span the producer's child; the spans carry the SQS
 * messaging attributes and each outcome (processed, duplicate, retry, dead-lettered);
 * in batch mode one span per batch links to every message's producer.
 */
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { SpanKind, SpanStatusCode } from '@opentelemetry/api';
import type { MessageAttributeValue } from '@aws-sdk/client-sqs';
import { ATTR } from '../../../src/otel/index.js';
import { childrenOf, named, otelHarness, parentOf, type OtelHarness } from '../../helpers/otel.js';
import { waitFor } from '../../helpers/wait-for.js';
import { TIMEOUT, recordEffect, sqsIntegration } from '../sqs/harness.js';

const it_ = sqsIntegration('otel');
let otel: OtelHarness;
beforeEach(() => {
  otel = otelHarness();
});
afterEach(async () => otel.shutdown());

/** Message attributes: the dedup key in `op`, plus the given headers (a traceparent). */
function attributes(op: string, headers: Record<string, string> = {}) {
  const out: Record<string, MessageAttributeValue> = {
    op: { DataType: 'String', StringValue: op },
  };
  for (const [name, value] of Object.entries(headers))
    out[name] = { DataType: 'String', StringValue: value };
  return out;
}

const queueName = (url: string) => url.slice(url.lastIndexOf('/') + 1);

describe('OpenTelemetry on SQS', () => {
  it(
    'traces each message as a child of its producer, with every outcome',
    async () => {
      const { url } = await it_.queues.create('otel');
      const { url: dlq } = await it_.queues.create('otel-dlq');
      const producer = otel.producer('publish order');
      const sentA = await it_.queues.send(url, JSON.stringify({ id: 'a' }), {
        MessageAttributes: attributes('a', producer.headers),
      });
      for (let i = 0; i < 2; i++)
        await it_.queues.send(url, JSON.stringify({ id: 'b' }), {
          MessageAttributes: attributes('b'),
        });
      await it_.queues.send(url, JSON.stringify({ id: 'poison' }), {
        MessageAttributes: attributes('poison'),
      });
      // One delivery at a time: the second "b" finds the first committed (no busy claim).
      await it_.worker(
        { queueUrl: url, key: 'op', deadLetterQueueUrl: dlq },
        {
          telemetry: otel.telemetry,
          concurrency: 1,
          maxAttempts: 2,
          handler: async (job, ctx) => {
            if (job.id === 'poison') throw new Error('card declined');
            await recordEffect(ctx.tx, job.id, 'w', ctx.attempt, null);
          },
        },
      );
      await waitFor(async () => (await it_.queues.depth(dlq)).total === 1, {
        what: 'the poison message in the dead-letter queue',
        timeoutMs: 30_000,
      });
      await waitFor(async () => (await it_.queues.depth(url)).total === 0, {
        what: 'the queue to be empty',
      });
      await waitFor(() => named(otel.spans(), `process ${queueName(url)}`).length === 5, {
        what: 'five delivery spans',
      });

      const spans = otel.spans();
      const deliveries = named(spans, `process ${queueName(url)}`);
      const outcomes = (key: string) =>
        deliveries
          .filter((s) => s.attributes[ATTR.key] === key)
          .map((s) => s.attributes[ATTR.outcome]);
      expect(outcomes('a')).toEqual(['processed']);
      // Both acks may travel in one delete batch: their spans end in either order.
      expect(outcomes('b').sort()).toEqual(['duplicate', 'processed']);
      expect(outcomes('poison')).toEqual(['retry', 'dead-lettered']);

      const a = deliveries.find((s) => s.attributes[ATTR.key] === 'a')!;
      expect(a.kind).toBe(SpanKind.CONSUMER);
      expect(a.spanContext().traceId).toBe(producer.span.spanContext().traceId);
      expect(parentOf(a)).toBe(producer.span.spanContext().spanId);
      expect(a.attributes).toMatchObject({
        'messaging.system': 'aws_sqs',
        'messaging.destination.name': queueName(url),
        'messaging.operation.type': 'process',
        'messaging.message.id': sentA,
        [ATTR.consumer]: 'sqs-it',
      });
      const [transaction] = childrenOf(spans, a);
      expect(childrenOf(spans, transaction!).map((s) => s.name)).toEqual([
        'claim',
        'handler',
        'commit',
      ]);
      const dead = deliveries.find((s) => s.attributes[ATTR.outcome] === 'dead-lettered')!;
      expect(dead.attributes).toMatchObject({ [ATTR.attempt]: 2, 'error.type': 'EO_HANDLER' });
      expect(dead.status.code).toBe(SpanStatusCode.ERROR);
    },
    TIMEOUT,
  );

  it(
    'in batch mode, links each batch span to the producers of its messages',
    async () => {
      const { url } = await it_.queues.create('otel-batch');
      const producers = [otel.producer('p1'), otel.producer('p2'), otel.producer('p3')];
      for (const [i, p] of producers.entries())
        await it_.queues.send(url, JSON.stringify({ id: `m${i}` }), {
          MessageAttributes: attributes(`m${i}`, p.headers),
        });
      await it_.worker(
        { queueUrl: url, key: 'op' },
        {
          telemetry: otel.telemetry,
          handler: undefined,
          batch: { maxSize: 3, maxWaitMs: 1000 },
          batchHandler: async (items, ctx) => {
            for (const item of items)
              await recordEffect(ctx.tx, item.message.id, 'w', item.attempt, null);
          },
        },
      );
      await waitFor(async () => (await it_.effects()).length === 3, { what: 'three effects' });
      await waitFor(
        () =>
          named(otel.spans(), `process ${queueName(url)}`).reduce(
            (n, s) => n + Number(s.attributes['messaging.batch.message_count']),
            0,
          ) === 3,
        { what: 'the batch spans of all three messages' },
      );

      const batches = named(otel.spans(), `process ${queueName(url)}`);
      for (const batch of batches) {
        expect(batch.kind).toBe(SpanKind.CONSUMER);
        expect(parentOf(batch)).toBeUndefined();
        expect(batch.attributes[ATTR.outcome]).toBe('processed');
        expect(batch.links).toHaveLength(Number(batch.attributes['messaging.batch.message_count']));
      }
      const linked = batches.flatMap((b) => b.links.map((l) => l.context.spanId)).sort();
      expect(linked).toEqual(producers.map((p) => p.span.spanContext().spanId).sort());
    },
    TIMEOUT,
  );
});
