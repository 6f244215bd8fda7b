/**
 * The Prisma client the data-layer tests and the harnesses' `--data-layer prisma` share,
 * generated from ./schema.prisma into ./generated (committed: see docs/development.md).
 */
import { PrismaPg } from '@prisma/adapter-pg';
import { PrismaClient } from './generated/client.js';

export { PrismaClient };

/**
 * A Prisma 7 client over `@prisma/adapter-pg`, on `connectionString` (pg's own options,
 * `max` for the pool's size). Prisma names every table with its schema (`public` unless
 * the adapter's `schema` option says otherwise), so the schema a test or run database's
 * URL sets as its `search_path` (`options=-c search_path=…`) is given to the adapter too.
 */
export function prismaClient(connectionString: string, pool: { max?: number } = {}): PrismaClient {
  const options = new URL(connectionString).searchParams.get('options') ?? '';
  const schema = /search_path=([A-Za-z0-9_]+)/.exec(options)?.[1];
  return new PrismaClient({
    adapter: new PrismaPg({ connectionString, ...pool }, schema === undefined ? {} : { schema }),
  });
}
