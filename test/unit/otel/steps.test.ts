/**
 * otelStepsTelemetry() on a flow's run without a database (a fake of the runner's
 * store): one span per step, named for the flow and the step, with its attempt (the
 * owner's fence) and outcome; replayed steps of a resumed run are spans too; a stopped
 * step is an error, a final one is not; the step's work runs with its span active.
 */
import { describe, expect, it, jest } from '@jest/globals';
import { context, ROOT_CONTEXT, SpanStatusCode, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
  type ReadableSpan,
} from '@opentelemetry/sdk-trace-base';
import { defineFlow, type Flow } from '../../../src/index.js';
import { otelStepsTelemetry, STEPS_ATTR } from '../../../src/otel/index.js';
import { FlowDrive, type RunnerSettings } from '../../../src/steps/drive.js';
import type { FlowStore, StepEntry } from '../../../src/steps/store.js';
import type { StepsTelemetry } from '../../../src/steps/telemetry.js';
import type { Logger } from '../../../src/types.js';

context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());

/** The store's writes, always granted (this owner is never fenced here). */
const store = {
  recordStep: async (
    _owner: unknown,
    _position: number,
    _entry: unknown,
    work: (client: unknown) => Promise<{ value: unknown }>,
  ) => (await work({ query: () => Promise.resolve({ rows: [] }) })).value,
  extend: () => Promise.resolve(true),
  storeAnswer: () => Promise.resolve(),
} as unknown as FlowStore;

const ID = {
  scope: 's',
  key: 'k1',
  flow: 'charge',
  version: undefined,
  origin: '',
  fingerprint: Buffer.alloc(0),
};

function sdk() {
  const exporter = new InMemorySpanExporter();
  const tracerProvider = new BasicTracerProvider({
    spanProcessors: [new SimpleSpanProcessor(exporter)],
  });
  return { exporter, tracerProvider, tracer: tracerProvider.getTracer('app') };
}

/** A logger whose warnings a test counts (`warn`). */
const silent = (warn = jest.fn()): Logger => ({
  warn,
  error: jest.fn(),
  info: jest.fn(),
  debug: jest.fn(),
});

/** The flow: a DB step, a call (that `charge` may fail), a DB step. */
function chargeFlow(charge: () => unknown, inCall: () => void = () => undefined): Flow<unknown> {
  return defineFlow('charge', async (_input, run) => {
    await run.step('order', () => ({ id: 1 }));
    const c = await run.call('charge', () => {
      inCall();
      return charge();
    });
    await run.step('record', () => undefined);
    return { status: 201, body: c };
  });
}

async function drive(
  flow: Flow<unknown>,
  telemetry: StepsTelemetry,
  claim: { fence: number; steps: StepEntry[] },
  logger = silent(),
) {
  const settings: RunnerSettings = { leaseMs: 10_000, logger, telemetry };
  const run = new FlowDrive(
    store,
    settings,
    flow,
    ID,
    { ...claim, resumed: claim.fence > 1 },
    undefined,
  );
  return run.run(undefined);
}

const attributes = (spans: ReadableSpan[]) =>
  spans.map((s) => ({
    name: s.name,
    step: s.attributes[STEPS_ATTR.step],
    attempt: s.attributes[STEPS_ATTR.attempt],
    outcome: s.attributes[STEPS_ATTR.outcome],
    status: s.status.code,
  }));

describe('otelStepsTelemetry', () => {
  it('a first run: one span per step, attempt 1, recorded, children of the active span', async () => {
    const { exporter, tracerProvider, tracer } = sdk();
    const request = tracer.startSpan('POST /charges');
    let provider: ReadableSpan | undefined;
    const flow = chargeFlow(
      () => ({ id: 'ch_1' }),
      () => {
        // The provider call's client span, started inside the call's work.
        const span = tracer.startSpan('POST /v1/charges');
        span.end();
        provider = span as unknown as ReadableSpan;
      },
    );
    const ended = await context.with(trace.setSpan(ROOT_CONTEXT, request), () =>
      drive(flow, otelStepsTelemetry({ tracerProvider }), { fence: 1, steps: [] }),
    );
    request.end();
    expect(ended.kind).toBe('answered');
    const steps = exporter.getFinishedSpans().filter((s) => s.name.startsWith('step '));
    expect(attributes(steps)).toEqual([
      {
        name: 'step charge.order',
        step: 'order',
        attempt: 1,
        outcome: 'recorded',
        status: SpanStatusCode.UNSET,
      },
      {
        name: 'step charge.charge',
        step: 'charge',
        attempt: 1,
        outcome: 'recorded',
        status: SpanStatusCode.UNSET,
      },
      {
        name: 'step charge.record',
        step: 'record',
        attempt: 1,
        outcome: 'recorded',
        status: SpanStatusCode.UNSET,
      },
    ]);
    for (const span of steps) {
      expect(span.parentSpanContext?.spanId).toBe(request.spanContext().spanId);
      expect(span.attributes[STEPS_ATTR.flow]).toBe('charge');
      expect(span.attributes[STEPS_ATTR.resumed]).toBe(false);
    }
    expect(steps.map((s) => s.attributes[STEPS_ATTR.kind])).toEqual(['step', 'call', 'step']);
    const charge = steps[1];
    expect(provider?.parentSpanContext?.spanId).toBe(charge?.spanContext().spanId);
  });

  it('a resumed run: the recorded step replayed, a transient failure stopped (an error)', async () => {
    const { exporter, tracerProvider } = sdk();
    const unavailable = Object.assign(new Error('provider 503'), { status: 503 });
    const ended = await drive(
      chargeFlow(() => {
        throw unavailable;
      }),
      otelStepsTelemetry({ tracerProvider }),
      { fence: 3, steps: [{ name: 'order', kind: 'step', result: '{"id":1}' }] },
    );
    expect(ended.kind).toBe('stopped');
    const spans = exporter.getFinishedSpans();
    expect(attributes(spans)).toEqual([
      {
        name: 'step charge.order',
        step: 'order',
        attempt: 3,
        outcome: 'replayed',
        status: SpanStatusCode.UNSET,
      },
      {
        name: 'step charge.charge',
        step: 'charge',
        attempt: 3,
        outcome: 'stopped',
        status: SpanStatusCode.ERROR,
      },
    ]);
    expect(spans[1]?.attributes['error.type']).toBe('EO_STEP_FAILED');
    expect(spans.every((s) => s.attributes[STEPS_ATTR.resumed] === true)).toBe(true);
  });

  it('a final error: the step ends the flow, its span not an error', async () => {
    const { exporter, tracerProvider } = sdk();
    const declined = Object.assign(new Error('card declined'), { status: 402 });
    const ended = await drive(
      chargeFlow(() => {
        throw declined;
      }),
      otelStepsTelemetry({ tracerProvider }),
      { fence: 1, steps: [] },
    );
    expect(ended).toMatchObject({ kind: 'answered', answer: { status: 402 } });
    expect(
      attributes(exporter.getFinishedSpans()).map((s) => [s.step, s.outcome, s.status]),
    ).toEqual([
      ['order', 'recorded', SpanStatusCode.UNSET],
      ['charge', 'final', SpanStatusCode.UNSET],
    ]);
  });

  it('a telemetry hook that throws is logged; the flow runs on', async () => {
    const warn = jest.fn();
    const logger = silent(warn);
    const broken: StepsTelemetry = {
      startStep: () => {
        throw new Error('exporter down');
      },
    };
    const ended = await drive(
      chargeFlow(() => ({ id: 'ch_2' })),
      broken,
      { fence: 1, steps: [] },
      logger,
    );
    expect(ended).toMatchObject({ kind: 'answered', answer: { status: 201 } });
    expect(warn).toHaveBeenCalledTimes(3);
  });
});
