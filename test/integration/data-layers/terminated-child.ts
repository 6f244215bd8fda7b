/**
 * One layer, opened as its docs show with a pool of one connection and no `error`
 * listener of the test's on any connection (a pg Pool the app makes gets the pool-level
 * listener pg's docs ask for): a transaction whose backend is terminated in its middle
 * (as the library does to an abandoned handler), then another transaction, which must
 * get a working connection. Prints `next: 1` and exits 0; an unhandled `error` event
 * kills the process first.
 * Usage: terminated-child.ts <databaseUrl> <layer>
 */
import { drizzle } from 'drizzle-orm/node-postgres';
import knexFactory from 'knex';
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import postgres from 'postgres';
import type { DataLayer } from '../../../src/data-layer.js';
import { drizzleLayer } from '../../../adapters/drizzle/index.js';
import { knexLayer } from '../../../adapters/knex/index.js';
import { kyselyLayer } from '../../../adapters/kysely/index.js';
import { postgresLayer } from '../../../adapters/postgres-js/index.js';
import { prismaLayer } from '../../../adapters/prisma/index.js';
import { typeormLayer } from '../../../adapters/typeorm/index.js';
import { prismaClient } from './prisma.fixture.js';
import { openDataSource } from './typeorm.fixture.js';

const [url, name] = process.argv.slice(2) as [string, string];

/** A pg Pool of one, as an app makes it: only the pool-level listener pg's docs ask for. */
function appPool(): pg.Pool {
  const pool = new pg.Pool({ connectionString: url, max: 1 });
  pool.on('error', () => undefined);
  return pool;
}

async function open(): Promise<{ layer: DataLayer<unknown>; close: () => Promise<unknown> }> {
  switch (name) {
    case 'kysely': {
      const pool = appPool();
      const db = new Kysely<object>({ dialect: new PostgresDialect({ pool }) });
      return { layer: kyselyLayer(db, { pool }), close: () => db.destroy() };
    }
    case 'drizzle-pg': {
      const pool = appPool();
      return {
        layer: drizzleLayer(drizzle({ client: pool })),
        close: () => pool.end(),
      };
    }
    case 'knex': {
      const knex = knexFactory({ client: 'pg', connection: url, pool: { min: 0, max: 1 } });
      return { layer: knexLayer(knex) as DataLayer<unknown>, close: () => knex.destroy() };
    }
    case 'typeorm': {
      const dataSource = await openDataSource(url, { poolSize: 1 });
      return {
        layer: typeormLayer(dataSource),
        close: () => dataSource.destroy(),
      };
    }
    case 'prisma': {
      const prisma = prismaClient(url, { max: 1 });
      return {
        layer: prismaLayer(prisma),
        close: () => prisma.$disconnect(),
      };
    }
    case 'postgres-js': {
      const sql = postgres(url, { max: 1, onnotice: () => undefined });
      return { layer: postgresLayer(sql) as DataLayer<unknown>, close: () => sql.end() };
    }
    default:
      throw new Error(`no layer ${name}`);
  }
}

const settings = { timeoutMs: 30_000, acquireTimeoutMs: 10_000 };
const { layer, close } = await open();
const killed = await layer
  .transaction(settings, async (tx) => {
    await layer.sql(tx).query('SELECT pg_terminate_backend(pg_backend_pid())');
  })
  .then(
    () => 'committed',
    () => 'rejected',
  );
process.stdout.write(`terminated: ${killed}\n`);
// The pool may still hand out the dead connection once (Prisma's adapter does): the
// transaction after it must work.
let next: unknown;
for (let attempt = 0; attempt < 2 && next === undefined; attempt++) {
  next = await layer
    .transaction(settings, async (tx) => {
      const { rows } = await layer.sql(tx).query<{ one: number }>('SELECT 1::int AS one');
      return rows[0]?.one;
    })
    .catch(() => undefined);
}
process.stdout.write(`next: ${String(next)}\n`);
await close();
