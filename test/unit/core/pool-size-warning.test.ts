/**
 * Issue 11: a pool smaller than `concurrency + 1` can deadlock a handler that also uses
 * the pool (every connection held by a claim): createConsumer warns about it.
 */
import { afterEach, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { createConsumer, type Logger } from '../../../src/index.js';
import { memorySource } from '../../../src/testing/index.js';

const pools: pg.Pool[] = [];
afterEach(async () => {
  await Promise.all(pools.splice(0).map((p) => p.end()));
});

/** Builds a consumer (never started: nothing connects) and returns the warnings it logged. */
function warningsFor(poolOptions: pg.PoolConfig, concurrency: number | undefined): object[] {
  const pool = new pg.Pool({ host: '127.0.0.1', port: 1, ...poolOptions });
  pools.push(pool);
  const warnings: object[] = [];
  const logger: Logger = {
    debug: () => undefined,
    info: () => undefined,
    warn: (obj, msg) => warnings.push({ ...obj, msg }),
    error: () => undefined,
  };
  createConsumer({
    name: 'pool-size',
    source: memorySource(),
    pool,
    handler: async () => undefined,
    logger,
    ...(concurrency === undefined ? {} : { concurrency }),
  });
  return warnings;
}

describe('createConsumer and the pool size', () => {
  it.each([
    ['pg’s default max (10), default concurrency (10)', {}, undefined],
    ['max 5, concurrency 10', { max: 5 }, 10],
    ['max 4, concurrency 4', { max: 4 }, 4],
  ])('warns when the pool max is below concurrency + 1: %s', (_what, poolOptions, concurrency) => {
    expect(warningsFor(poolOptions, concurrency).length).toBeGreaterThan(0);
  });

  it.each([
    ['max 11, default concurrency (10)', { max: 11 }, undefined],
    ['max 5, concurrency 4', { max: 5 }, 4],
  ])('stays quiet when the pool is big enough: %s', (_what, poolOptions, concurrency) => {
    expect(warningsFor(poolOptions, concurrency)).toEqual([]);
  });
});
