import { randomUUID } from 'node:crypto';
import { describe, expect, it } from '@jest/globals';
import {
  createConsumer,
  createFlowRunner,
  createStepsCompleter,
  defineFlow,
  flowHandler,
} from 'effectively-once';
import { memorySource } from 'effectively-once/testing';
import { createTestDatabase } from '../../helpers/db.js';
import { waitFor } from '../../helpers/wait-for.js';

describe('steps: runner, completer, consumer door', () => {
  it('refuses a resumed key whose recorded steps were renamed; the completer finishes an abandoned one', async () => {
    const db = await createTestDatabase('steps_runner');
    try {
      const runner = createFlowRunner({ pool: db.pool, leaseMs: 50 });
      const key = randomUUID();
      const ran: string[] = [];
      // A first deploy stops at a recovery point after its first step.
      const v1 = defineFlow<{ n: number }>('f', async (input, run) => {
        await run.step('a', () => (ran.push('a'), input.n));
        await run.call('b', () => {
          throw new Error('network');
        });
        return { status: 200 };
      });
      const stopped = await runner.run(v1, { scope: 's', key, input: { n: 1 } });
      expect(stopped).toMatchObject({ kind: 'retry', error: { code: 'EO_STEP_FAILED' } });

      const renamed = defineFlow<{ n: number }>('f', async (_input, run) => {
        await run.step('a-renamed', () => ran.push('x'));
        return { status: 200 };
      });
      await new Promise((resolve) => setTimeout(resolve, 80));
      const refused = await runner.run(renamed, { scope: 's', key, input: { n: 1 } });
      expect(refused).toMatchObject({ kind: 'refused', error: { code: 'EO_FLOW_STEPS_CHANGED' } });
      expect(ran).toEqual(['a']);

      // The completer finishes it with the recorded input, replaying step a.
      const v2 = defineFlow<{ n: number }>('f', async (input, run) => {
        const a = await run.step('a', () => (ran.push('a'), -1));
        const b = await run.call('b', (derived) => derived);
        return { status: 201, body: { a, b, n: input.n } };
      });
      await new Promise((resolve) => setTimeout(resolve, 80));
      const completer = createStepsCompleter({ pool: db.pool, flows: [v2], leaseMs: 50 });
      expect(await completer.runOnce()).toBe(1);
      expect(ran).toEqual(['a']);
      const answered = await runner.run(v2, { scope: 's', key, input: { n: 1 } });
      expect(answered).toMatchObject({
        kind: 'answered',
        replayed: true,
        answer: { status: 201, body: { a: 1, n: 1 } },
      });
    } finally {
      await db.close();
    }
  });

  it('the consumer door: a redelivery resumes the flow; the message is acked once answered', async () => {
    const db = await createTestDatabase('steps_consumer');
    try {
      const runner = createFlowRunner({ pool: db.pool, leaseMs: 50 });
      let calls = 0;
      const effects: string[] = [];
      const flow = defineFlow<{ id: string }>('deliver', async (input, run) => {
        await run.step('one', () => effects.push(`one ${input.id}`));
        await run.call('two', () => {
          if (++calls === 1) throw new Error('provider down');
          effects.push(`two ${input.id}`);
        });
        return { status: 200 };
      });
      const source = memorySource<{ id: string }>();
      const consumer = createConsumer<{ id: string }>({
        pool: db.pool,
        source,
        name: 'steps-test',
        handler: flowHandler(runner, flow),
        backoff: { initialMs: 60, maxMs: 100 },
      });
      await consumer.start();
      const sent = source.send({ id: 'm1' }, { key: 'k1' });
      await waitFor(() => sent.state === 'acked', { what: 'the message acked', timeoutMs: 10_000 });
      await consumer.stop();
      expect(effects).toEqual(['one m1', 'two m1']);
      expect(sent.attempts).toBe(2);
    } finally {
      await db.close();
    }
  });
});
