/**
 * Issue 32, defect 4 (the consumer's half): `stop({ timeoutMs })` resolves by its
 * deadline whatever the source's close is doing. The source gets the deadline as
 * `close({ signal })`; a close still running then goes on in the background.
 */
import { describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { createConsumer } from '../../../src/index.js';
import type { Source, SourceContext } from '../../../src/types.js';

/** A source whose close never ends on its own (a broker client that does not let go). */
class StuckSource implements Source<unknown> {
  readonly description = 'stuck';
  closeSignal: AbortSignal | undefined;

  async run(ctx: SourceContext<unknown>): Promise<void> {
    if (ctx.signal.aborted) return;
    await new Promise<void>((resolve) =>
      ctx.signal.addEventListener('abort', () => resolve(), { once: true }),
    );
  }

  close(options?: { readonly signal?: AbortSignal }): Promise<void> {
    this.closeSignal = options?.signal;
    return new Promise<void>(() => undefined);
  }
}

describe('consumer.stop({ timeoutMs }) with a source slow to close', () => {
  it('resolves at the deadline, which the source got as its close signal', async () => {
    // Never connected: nothing is delivered, the database is not needed.
    const pool = new pg.Pool({ host: '127.0.0.1', port: 1, max: 2 });
    pool.on('error', () => undefined);
    const source = new StuckSource();
    const consumer = createConsumer({
      name: 'stuck-close',
      source,
      pool,
      migrate: false,
      handler: async () => undefined,
    });
    try {
      await consumer.start();
      const stopped = consumer.stop({ timeoutMs: 300 }).then(() => 'stopped' as const);
      // Far beyond the deadline: without the bound, stop() would wait for close forever.
      const outcome = await Promise.race([
        stopped,
        new Promise<'still stopping'>((resolve) =>
          setTimeout(() => resolve('still stopping'), 20_000),
        ),
      ]);
      expect(outcome).toBe('stopped');
      expect(source.closeSignal?.aborted).toBe(true);
    } finally {
      await pool.end();
    }
  }, 30_000);
});
