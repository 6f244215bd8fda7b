/**
 * Poison rows in the outbox run: a few operations' rows are refused by the relays with
 * an error that cannot succeed later, so they park (and hold back their accounts).
 * Once service A has applied 80 % of the operations and a row has parked (or 30 s
 * later), the run "fixes the cause" (opens the poison gate) and requeues parked rows,
 * every second while any is parked; they then go out in their accounts' order.
 */
import type pg from 'pg';
import { outboxStats, requeueParked } from 'effectively-once/outbox';
import { outboxTables } from './shared.js';

export class PoisonFixer {
  /** Rows put back by requeueParked. */
  requeued = 0;
  private fixed: boolean;
  private waitingSince: number | undefined;

  constructor(
    private readonly pool: pg.Pool,
    private readonly schema: string,
    private readonly operations: number,
    poison: number,
    private readonly say: (line: string) => void,
  ) {
    this.fixed = poison === 0;
  }

  /** One step, every second of the run: fix when due, then requeue what is parked. */
  async tick(appliedByA: number): Promise<void> {
    const stats = await outboxStats(this.pool, { schema: this.schema });
    if (!this.fixed) {
      if (appliedByA < 0.8 * this.operations) return;
      this.waitingSince ??= Date.now();
      if (stats.parked === 0 && Date.now() - this.waitingSince < 30_000) return;
      await this.pool.query(`UPDATE ${outboxTables(this.schema).poisonGate} SET fixed = true`);
      this.fixed = true;
      this.say(`poison: fixed with ${stats.parked} rows parked, A at ${appliedByA}`);
    }
    if (stats.parked === 0) return;
    const n = await requeueParked(this.pool, { schema: this.schema });
    this.requeued += n;
    this.say(`poison: requeued ${n} parked rows`);
  }

  /** Poison rows a relay refused (each parks: the error cannot succeed later). */
  async parkedRows(): Promise<number> {
    const { rows } = await this.pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM ${outboxTables(this.schema).poisonRefused}`,
    );
    return rows[0]?.n ?? 0;
  }
}
