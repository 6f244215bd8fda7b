/**
 * OpenTelemetry traces and metrics of a consumer, printed by the SDK's console
 * exporters. A memory source stands in for the broker so that only Postgres is needed;
 * with `sqsSource` or `kafkaSource` the telemetry option is the same, and the
 * producer's `traceparent` comes from the message attributes or headers.
 *
 *   DATABASE_URL=postgres://… npx tsx examples/otel-console.ts
 */
import { pathToFileURL } from 'node:url';
import {
  context,
  defaultTextMapSetter,
  propagation,
  ROOT_CONTEXT,
  trace,
} from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import {
  ConsoleMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
  type PushMetricExporter,
} from '@opentelemetry/sdk-metrics';
import {
  BasicTracerProvider,
  ConsoleSpanExporter,
  SimpleSpanProcessor,
  type SpanExporter,
} from '@opentelemetry/sdk-trace-base';
import pg from 'pg';
import { createConsumer } from 'effectively-once';
import { otelTelemetry } from 'effectively-once/otel';
import { memorySource } from 'effectively-once/testing';

/** A payment to record once. */
export interface Payment {
  paymentId: string;
  cents: number;
}

/** Runs the example against `DATABASE_URL`; exporters default to the console. */
export async function main({
  env = process.env,
  spanExporter = new ConsoleSpanExporter(),
  metricExporter = new ConsoleMetricExporter(),
}: {
  env?: NodeJS.ProcessEnv;
  spanExporter?: SpanExporter;
  metricExporter?: PushMetricExporter;
} = {}): Promise<void> {
  // #region setup
  // The application owns the SDK: the library only calls @opentelemetry/api.
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  const tracerProvider = new BasicTracerProvider({
    spanProcessors: [new SimpleSpanProcessor(spanExporter)],
  });
  const reader = new PeriodicExportingMetricReader({
    exporter: metricExporter,
    exportIntervalMillis: 60_000,
  });
  const meterProvider = new MeterProvider({ readers: [reader] });
  // #endregion

  const pool = new pg.Pool({ connectionString: env.DATABASE_URL });
  try {
    await pool.query(
      'CREATE TABLE IF NOT EXISTS payments (id text PRIMARY KEY, cents bigint NOT NULL)',
    );
    // #region consumer
    const source = memorySource<Payment>();
    let declined = 0;
    const consumer = createConsumer<Payment>({
      name: 'payments',
      pool,
      source,
      backoff: { initialMs: 10, maxMs: 10 },
      telemetry: otelTelemetry({ tracerProvider, meterProvider }),
      handler: async (payment, { tx }) => {
        // The handler runs inside its span: spans it starts are children of `handler`.
        const span = tracerProvider.getTracer('payments-app').startSpan('record payment');
        try {
          if (payment.paymentId === 'p-2' && declined++ === 0) throw new Error('card declined');
          await tx.query('INSERT INTO payments (id, cents) VALUES ($1, $2)', [
            payment.paymentId,
            payment.cents,
          ]);
        } finally {
          span.end();
        }
      },
    });
    // #endregion
    await consumer.start();

    // A producer sends p-1 with its trace context; the consumer's span becomes its child.
    const producerSpan = tracerProvider.getTracer('checkout').startSpan('send payment');
    const headers: Record<string, string> = {};
    propagation.inject(trace.setSpan(ROOT_CONTEXT, producerSpan), headers, defaultTextMapSetter);
    producerSpan.end();
    source.send({ paymentId: 'p-1', cents: 1250 }, { key: 'p-1', headers });
    // A duplicate: as a redelivery would, it carries the same headers, so whichever of
    // the two claims the key first, the handler's spans sit under `send payment`.
    source.send({ paymentId: 'p-1', cents: 1250 }, { key: 'p-1', headers });
    source.send({ paymentId: 'p-2', cents: 990 }, { key: 'p-2' }); // fails once, then commits
    while (source.outstanding > 0) await new Promise((r) => setTimeout(r, 10));
    await consumer.stop();
  } finally {
    await pool.end();
    await meterProvider.shutdown(); // exports the metrics once more
    await tracerProvider.shutdown();
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  await main();
}
