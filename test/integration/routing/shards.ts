import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import pg, { type PoolClient } from 'pg';
import { freePorts } from '../../../kit/services/ports.js';
import { createPostgres, pgStart, pgStop } from '../../../kit/services/postgres.js';
import { RUNS_DIR, type PostgresState } from '../../../kit/services/state.js';
import type { Routing, RouteTarget } from '../../../src/index.js';

/** One private Postgres cluster of the test's shards, with a pool on it. */
export interface Shard {
  name: string;
  state: PostgresState;
  pool: pg.Pool;
}

/**
 * `count` private Postgres clusters (initdb'd under the services' runs directory, so CI's
 * leak check sees their processes), each a database a routed door sends keys to. Crashing
 * one disturbs no other test file.
 */
export class Shards {
  private constructor(
    readonly root: string,
    readonly all: Shard[],
  ) {}

  static async start(count: number): Promise<Shards> {
    fs.mkdirSync(RUNS_DIR, { recursive: true });
    const root = fs.mkdtempSync(path.join(RUNS_DIR, 'shards-'));
    fs.chmodSync(root, 0o755); // the postgres user must reach the data dirs inside
    const ports = await freePorts(count);
    const all = await Promise.all(
      ports.map(async (port, i) => {
        const state = await createPostgres(path.join(root, `shard-${i}`), port);
        const pool = new pg.Pool({ connectionString: state.url, max: 12 });
        // A crashed shard's idle connections report their end here, not as a crash of the test.
        pool.on('error', () => undefined);
        return { name: `shard-${i}`, state, pool };
      }),
    );
    return new Shards(root, all);
  }

  /** The routing the doors get: a key goes to the shard its hash names. */
  routing<Tx = PoolClient>(): Routing<Tx> {
    const databases = Object.fromEntries(this.all.map((s) => [s.name, s.pool]));
    return { databases, route: (target: RouteTarget) => this.shardOf(target.key).name };
  }

  /** The shard a key lives in (sha256 of the key, modulo the count). */
  shardOf(key: string): Shard {
    const n = createHash('sha256').update(key).digest().readUInt32BE(0);
    return this.all[n % this.all.length]!;
  }

  /** Crashes a shard (immediate stop: no checkpoint, recovery at the next start). */
  async crash(shard: Shard): Promise<void> {
    await pgStop(shard.state, 'immediate');
  }

  async restart(shard: Shard): Promise<void> {
    await pgStart(shard.state);
  }

  async stop(): Promise<void> {
    for (const s of this.all) {
      await s.pool.end().catch(() => undefined);
      await pgStop(s.state, 'immediate');
    }
    fs.rmSync(this.root, { recursive: true, force: true });
  }
}
