/**
 * A consumer process for the matrix's crash case: it processes one message through the
 * data layer of `fixture` (a module path and its export), prints `committed` when the
 * consumer acks (the COMMIT is behind it), and then never acks, waiting to be SIGKILLed.
 * Usage: crash-child.ts <databaseUrl> <fixtureModule> <fixtureExport> <consumer> <key>
 */
import pg from 'pg';
import { createConsumer } from '../../../src/index.js';
import type { Source, SourceContext } from '../../../src/types.js';
import type { LayerFixture } from './fixture.js';

const [url, modulePath, exportName, name, key] = process.argv.slice(2) as [
  string,
  string,
  string,
  string,
  string,
];
const module = (await import(modulePath)) as Record<string, LayerFixture<unknown>>;
const fixture = module[exportName]!;
const opened = await fixture.open(url);
const pool = new pg.Pool({ connectionString: url, max: 5 });

const source: Source<{ amount: number }> = {
  description: 'crash',
  async run(ctx: SourceContext<{ amount: number }>) {
    await ctx.deliver({
      key,
      body: { amount: 1 },
      payload: '{"amount":1}',
      raw: undefined,
      attempt: 1,
      // The COMMIT is verified by now: say so, then die before the broker hears of it.
      ack: () => {
        process.stdout.write('committed\n');
        return new Promise<void>(() => undefined);
      },
      retry: async () => void process.stdout.write('retry\n'),
      deadLetter: async () => void process.stdout.write('dead-letter\n'),
      release: async () => void process.stdout.write('release\n'),
    });
  },
  async close() {},
};

const consumer = createConsumer<{ amount: number }, unknown>({
  name,
  source,
  pool,
  dataLayer: opened.layer,
  handler: async (m, ctx) =>
    opened.insertEffect(ctx.tx, { id: ctx.key, door: 'consumer', amount: m.amount }),
});
await consumer.start();
