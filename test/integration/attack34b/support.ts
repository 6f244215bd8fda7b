/**
 * What the attack34b reproductions share: a database of their own with the effects
 * table (data-layers/matrix-consumer.ts), a consumer on a data layer driven by hand, and
 * the reads of what committed (effects, claims).
 */
import type { DataLayer } from '../../../src/data-layer.js';
import { createConsumer } from '../../../src/index.js';
import type { ConsumerOptions } from '../../../src/consumer/options.js';
import type { Consumer } from '../../../src/consumer/types.js';
import { ManualSource } from '../../helpers/manual-source.js';
import type { LayerDatabase } from '../data-layers/matrix-consumer.js';

export { createLayerDatabase, type LayerDatabase } from '../data-layers/matrix-consumer.js';

/** The message every reproduction delivers. */
export interface Message {
  amount: number;
}

/** Consumers started by a test file, stopped in its afterAll. */
export class Consumers {
  private readonly running: Consumer[] = [];

  constructor(private readonly db: () => LayerDatabase) {}

  /** A started consumer named `name` on `dataLayer`, fed by the returned source. */
  async start<Tx>(
    name: string,
    dataLayer: DataLayer<Tx>,
    handler: NonNullable<ConsumerOptions<Message, Tx>['handler']>,
    over: Partial<ConsumerOptions<Message, Tx>> = {},
  ): Promise<ManualSource<Message>> {
    const source = new ManualSource<Message>();
    const consumer = createConsumer<Message, Tx>({
      name,
      source,
      pool: this.db().pool,
      dataLayer,
      concurrency: 1,
      maxAttempts: 5,
      handler,
      ...over,
    });
    this.running.push(consumer);
    await consumer.start();
    return source;
  }

  async stop(): Promise<void> {
    await Promise.all(this.running.map((c) => c.stop({ timeoutMs: 5000 })));
  }
}

/** The ids of the committed effects starting with `prefix`. */
export async function effects(db: LayerDatabase, prefix: string): Promise<string[]> {
  const { rows } = await db.pool.query<{ id: string }>(
    'SELECT id FROM layer_effects WHERE id LIKE $1 ORDER BY id',
    [`${prefix}%`],
  );
  return rows.map((r) => r.id);
}

/** Whether consumer `name`'s claim of `key` committed. */
export async function claimed(db: LayerDatabase, name: string, key: string): Promise<boolean> {
  const { rows } = await db.pool.query(
    'SELECT 1 FROM processed_messages WHERE consumer = $1 AND message_key = $2',
    [name, key],
  );
  return rows.length === 1;
}
