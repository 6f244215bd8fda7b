/**
 * The CLI on the steps flows table (`--family flows`): `inspect` shows a flow's state,
 * attempts, recorded steps and why its last run stopped; `prune --older-than` deletes
 * finished flows past the window and never an unfinished one; `migrate --only flows`
 * creates the table. Run in-process (runCli) on rows a real runner wrote.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createFlowRunner, defineFlow, type FlowRunner } from '../../../src/index.js';
import { runCli } from '../../../src/cli/run.js';
import { createTestDatabase, databaseUrl, type TestDatabase } from '../../helpers/db.js';

let db: TestDatabase;
let runner: FlowRunner;
/** Keys whose provider call fails (transiently) on the next run. */
const failing = new Set<string>();

const flow = defineFlow('charge', async (_input: { amount: number }, run) => {
  await run.step('order', () => ({ id: 7 }));
  const charge = await run.call('charge', () => {
    if (failing.delete(run.key))
      throw Object.assign(new Error('provider answered 503'), { status: 503 });
    return { id: `ch_${run.key}` };
  });
  await run.step('record', () => undefined);
  return { status: 201, body: charge };
});

beforeAll(async () => {
  db = await createTestDatabase('steps_cli');
  runner = createFlowRunner({ pool: db.pool, schema: db.schema, leaseMs: 60_000 });
});
afterAll(async () => {
  await db?.close();
});

async function eo(...argv: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await runCli([...argv, '--schema', db.schema], {
    stdout: (t) => (out += `${t}\n`),
    stderr: (t) => (err += `${t}\n`),
    env: { DATABASE_URL: databaseUrl() },
    signal: new AbortController().signal,
  });
  return { code, out, err };
}

async function inspect(key: string): Promise<Record<string, unknown>> {
  const run = await eo('inspect', key, '--family', 'flows', '--scope', 'shop', '--json');
  expect(run).toMatchObject({ code: 0 });
  return (JSON.parse(run.out) as { flow: Record<string, unknown> }).flow;
}

/** `stats --family flows --window 1d`: scope shop's finished flows older than a day. */
async function olderThanWindow(): Promise<number | undefined> {
  const run = await eo('stats', '--family', 'flows', '--window', '1d', '--json');
  expect(run.code).toBe(0);
  const doc = JSON.parse(run.out) as { scopes: Array<{ scope: string; olderThanWindow?: number }> };
  return doc.scopes.find((s) => s.scope === 'shop')?.olderThanWindow;
}

const start = (key: string) => ({ scope: 'shop', key, input: { amount: 5 } });

describe('effectively-once CLI on the flows table', () => {
  it('migrate --only flows creates it (versions 1 and 2)', async () => {
    const run = await eo('migrate', '--only', 'flows', '--json');
    expect(run.code).toBe(0);
    const { rows } = await db.pool.query<{ column_name: string }>(
      `SELECT column_name FROM information_schema.columns
       WHERE table_schema = $1 AND table_name = 'eo_flows' AND column_name = 'last_error'`,
      [db.schema],
    );
    expect(rows).toHaveLength(1);
  });

  it('inspect: a flow stopped at a recovery point, then finished by its retry', async () => {
    const key = randomUUID();
    failing.add(key);
    expect((await runner.run(flow, start(key))).kind).toBe('retry');
    const stopped = await inspect(key);
    expect(stopped).toMatchObject({
      flow: 'charge',
      state: 'resumable',
      fence: 1,
      status: null,
      steps: [{ position: 0, name: 'order', kind: 'step', resultBytes: 8 }],
      lastError: { code: 'EO_STEP_FAILED', step: 'charge', fence: 1 },
    });
    expect(String((stopped['lastError'] as { message: string }).message)).toContain(
      'provider answered 503',
    );

    expect(await runner.run(flow, start(key))).toMatchObject({ kind: 'answered' });
    const finished = await inspect(key);
    expect(finished).toMatchObject({
      state: 'finished',
      fence: 2,
      status: 201,
      steps: [{ name: 'order' }, { name: 'charge', kind: 'call' }, { name: 'record' }],
      // Why the first attempt stopped stays readable after the flow finished.
      lastError: { code: 'EO_STEP_FAILED', fence: 1 },
    });
    const text = await eo('inspect', key, '--family', 'flows', '--scope', 'shop');
    expect(text.out).toMatch(/state: +finished/);
    expect(text.out).toMatch(/attempts: +2 /);
    expect(text.out).toMatch(/1 +charge +call +\d+ bytes/);
  });

  it('inspect: no flow is exit 3, a missing --scope a usage error', async () => {
    const missing = await eo('inspect', randomUUID(), '--family', 'flows', '--scope', 'shop');
    expect(missing.code).toBe(3);
    expect(missing.out).toContain('no flow in scope "shop"');
    const noScope = await eo('inspect', 'k', '--family', 'flows');
    expect(noScope.code).toBe(2);
    expect(noScope.err).toContain('--scope');
  });

  it('prune --older-than deletes finished flows past the window, never an unfinished one', async () => {
    const [old, recent, unfinished] = [randomUUID(), randomUUID(), randomUUID()];
    for (const key of [old, recent])
      expect(await runner.run(flow, start(key))).toMatchObject({ kind: 'answered' });
    failing.add(unfinished);
    expect((await runner.run(flow, start(unfinished))).kind).toBe('retry');
    // Both aged past the window: only the finished one may go.
    await db.pool.query(
      `UPDATE eo_flows SET created_at = now() - interval '3 days',
         finished_at = CASE WHEN status IS NULL THEN NULL ELSE now() - interval '3 days' END
       WHERE flow_key = ANY($1)`,
      [[old, unfinished]],
    );
    expect(await olderThanWindow()).toBe(1);
    const dry = await eo('prune', '--family', 'flows', '--older-than', '1d', '--dry-run', '--json');
    expect(JSON.parse(dry.out)).toMatchObject({ family: 'flows', wouldDelete: 1 });
    const pruned = await eo('prune', '--family', 'flows', '--older-than', '1d', '--json');
    expect(JSON.parse(pruned.out)).toMatchObject({ family: 'flows', deleted: 1 });
    const { rows } = await db.pool.query<{ flow_key: string }>(
      'SELECT flow_key FROM eo_flows WHERE flow_key = ANY($1) ORDER BY flow_key',
      [[old, recent, unfinished]],
    );
    expect(rows.map((r) => r.flow_key).sort()).toEqual([recent, unfinished].sort());

    // stats counts what prune deletes: none past the window now.
    expect(await olderThanWindow()).toBe(0);
  });
});
