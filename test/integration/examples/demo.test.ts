import { describe, expect, it } from '@jest/globals';
import { databaseUrl, kafkaBrokers, sqsEndpoint } from '../../helpers/env.js';
import { runTs } from './support.js';

/** Runs `npm run demo`'s entry point and returns its exit code and output. */
async function demo(
  messages: number,
  env: NodeJS.ProcessEnv,
  extra: string[] = [],
): Promise<{ code: number | string; output: string }> {
  const run = runTs(
    'examples/demo/main.ts',
    ['--messages', String(messages), '--seed', '3', ...extra],
    env,
  );
  const code = await run.exited;
  return { code, output: run.output() };
}

describe('the demo (npm run demo)', () => {
  it('on embedded defaults: embedded Postgres + in-process SQS, every charge applied once', async () => {
    const { DATABASE_URL: _d, SQS_ENDPOINT: _s, KAFKA_BROKERS: _k, ...env } = process.env;
    const { code, output } = await demo(150, env);
    expect(output).toMatch(/\| charges applied\s+\|\s+150 \| ok/);
    expect(output).toMatch(/\| charged more than once\s+\|\s+0 \| ok/);
    expect(output).toContain('PASS: 150 charges applied exactly once');
    expect(code).toBe(0);
  }, 90_000);

  it('against DATABASE_URL and SQS_ENDPOINT (the test services)', async () => {
    const { KAFKA_BROKERS: _k, ...rest } = process.env;
    const env = { ...rest, DATABASE_URL: databaseUrl(), SQS_ENDPOINT: sqsEndpoint() };
    const { code, output } = await demo(100, env);
    expect(output).toContain('Postgres at DATABASE_URL + SQS at');
    expect(output).toContain('PASS: 100 charges applied exactly once');
    expect(code).toBe(0);
  }, 90_000);

  it('the Kafka variant (KAFKA_BROKERS): rebalances and a killed member, every charge applied once', async () => {
    const env = {
      ...process.env,
      DATABASE_URL: databaseUrl(),
      KAFKA_BROKERS: kafkaBrokers().join(','),
    };
    const { code, output } = await demo(200, env);
    expect(output).toContain('+ Kafka at');
    expect(output).toContain('PASS: 200 charges applied exactly once');
    expect(code).toBe(0);
  }, 90_000);

  it('the HTTP variant (--http) on embedded Postgres: callers retry through a flaky proxy, one charge per key', async () => {
    const { DATABASE_URL: _d, SQS_ENDPOINT: _s, KAFKA_BROKERS: _k, ...env } = process.env;
    const { code, output } = await demo(120, env, ['--http']);
    expect(output).toContain('examples/http-payments.ts on embedded Postgres');
    expect(output).toMatch(/\| charges applied\s+\|\s+120 \| ok/);
    expect(output).toMatch(/\| charged more than once\s+\|\s+0 \| ok/);
    // The proxy dropped responses after the COMMIT, and their retries were replays.
    expect(
      Number(/responses dropped after the COMMIT\s+\|\s+(\d+)/.exec(output)?.[1]),
    ).toBeGreaterThan(0);
    expect(
      Number(/final answers that were replays\s+\|\s+(\d+)/.exec(output)?.[1]),
    ).toBeGreaterThan(0);
    expect(output).toMatch(/Idempotent-Replayed: true {2}ok: byte-identical/);
    expect(output).toContain('PASS: 120 payments charged exactly once');
    expect(code).toBe(0);
  }, 90_000);
});
