/**
 * A server process running the charge flow (kit/steps/child.ts) SIGKILLs itself at each
 * recovery boundary of one request — inside a step before its COMMIT, after it, before
 * and after the provider call, after the last step, after the answer is stored — and
 * another process (a second server, on the client's retry) or the completer finishes the
 * flow. Whatever the boundary: the provider applied the charge once (a second call
 * carried the same derived key), each step's rows exist once, and the flow has one
 * stored answer, the one every later retry replays.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createStepsCompleter, derivedKey, type StepsCompleter } from 'effectively-once';
import { startProvider, type Provider } from '../../../kit/provider/provider.js';
import { chargeFlow, createOrdersTable, type ChargePoint } from '../../../kit/steps/charge.js';
import { spawnStepsServer, type StepsProcess } from '../../../kit/steps/spawn.js';
import { createTestDatabase, databaseUrl, type TestDatabase } from '../../helpers/db.js';
import { postCharge, type Answer } from './support.js';

/** The killed owner's lease: short, so the finisher may take over soon after the kill. */
const LEASE_MS = 1_000;

type Finisher = 'retry' | 'completer';
interface Case {
  point: ChargePoint | 'before-answer';
  finisher: Finisher;
  /** Steps recorded when the process died. */
  recorded: string[];
  /** Provider requests under the derived key, the killed owner's included. */
  requests: number;
}

const CASES: Case[] = [
  { point: 'mid-step', finisher: 'retry', recorded: [], requests: 1 },
  { point: 'order-committed', finisher: 'completer', recorded: ['order'], requests: 1 },
  { point: 'before-call', finisher: 'retry', recorded: ['order'], requests: 1 },
  { point: 'after-call', finisher: 'retry', recorded: ['order'], requests: 2 },
  { point: 'after-call', finisher: 'completer', recorded: ['order'], requests: 2 },
  { point: 'before-record', finisher: 'completer', recorded: ['order', 'charge'], requests: 1 },
  { point: 'mid-record', finisher: 'retry', recorded: ['order', 'charge'], requests: 1 },
  {
    point: 'record-committed',
    finisher: 'completer',
    recorded: ['order', 'charge', 'record'],
    requests: 1,
  },
  {
    point: 'before-answer',
    finisher: 'retry',
    recorded: ['order', 'charge', 'record'],
    requests: 1,
  },
];

let db: TestDatabase;
let provider: Provider;
let survivor: StepsProcess;
let survivorUrl: string;
let completer: StepsCompleter;
/** Each case's owner, started together up front (a process's start-up is most of a case). */
let owners: StepsProcess[] = [];

beforeAll(async () => {
  db = await createTestDatabase('steps_kill');
  provider = await startProvider();
  await createOrdersTable(db.pool);
  survivor = spawn();
  owners = CASES.map((c) => spawn(c.point));
  survivorUrl = `http://127.0.0.1:${await survivor.ready}`;
  await Promise.all(owners.map((o) => o.ready));
  completer = createStepsCompleter({
    pool: db.pool,
    schema: db.schema,
    flows: [chargeFlow(provider.url)],
    leaseMs: 30_000,
  });
});

afterAll(async () => {
  await completer?.stop();
  await survivor?.kill();
  await Promise.all(owners.map((o) => o.kill()));
  await provider?.close();
  await db?.close();
});

function spawn(killAt?: Case['point']): StepsProcess {
  return spawnStepsServer({
    framework: 'web',
    databaseUrl: databaseUrl(),
    schema: db.schema,
    providerUrl: provider.url,
    leaseMs: LEASE_MS,
    ...(killAt !== undefined ? { killAt } : {}),
  });
}

interface Row {
  fence: number;
  steps: Array<{ name: string }>;
  status: number | null;
  body: string | null;
}

async function flowRow(key: string): Promise<Row | undefined> {
  const { rows } = await db.pool.query<Row>(
    'SELECT fence::int AS fence, steps, status, body::text AS body FROM eo_flows WHERE flow_key = $1',
    [key],
  );
  return rows[0];
}

/** Retries as a client does on 409 (owner's lease live) and 503 (recovery point). */
async function retryUntilAnswered(key: string, body: unknown): Promise<Answer> {
  for (let attempt = 0; ; attempt++) {
    const answer = await postCharge(survivorUrl, key, body);
    if ((answer.status !== 409 && answer.status !== 503) || attempt >= 60) return answer;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** Completer passes until one finished the flow (its owner's lease has to expire first). */
async function completeOne(key: string): Promise<void> {
  for (let pass = 0; pass < 60; pass++) {
    if ((await completer.runOnce()) > 0) return;
    if ((await flowRow(key))?.status != null) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

describe('steps: a SIGKILL at every recovery boundary, then another process finishes', () => {
  it.each(CASES.map((c, i) => ({ ...c, i })))(
    'killed at $point, finished by the $finisher: one charge, one answer',
    async ({ point, finisher, recorded, requests, i }) => {
      const key = randomUUID();
      const body = { customer: `k-${point}`, amount: 42 };
      const providerKey = derivedKey('tenant', key, 'charge', 'charge', { schema: db.schema });
      const owner = owners[i];
      if (owner === undefined) throw new Error(`no owner for case ${i}`);
      const port = await owner.ready;
      // The owner dies before it answers: the client sees its connection drop.
      await expect(postCharge(`http://127.0.0.1:${port}`, key, body)).rejects.toThrow();
      expect(await owner.exited).toBe('SIGKILL');
      expect(owner.reached.at(-1)).toBe(point);

      const died = await flowRow(key);
      expect(died?.steps.map((s) => s.name) ?? []).toEqual(recorded);
      expect(died?.status ?? null).toBe(point === 'before-answer' ? 201 : null);

      if (finisher === 'completer') await completeOne(key);
      const answer = await retryUntilAnswered(key, body);
      expect(answer.status).toBe(201);
      // The completer (or the dead owner) stored it: the retry only replays.
      if (finisher === 'completer' || point === 'before-answer')
        expect(answer.headers['idempotent-replayed']).toBe('true');
      const result = JSON.parse(answer.body) as { order: number; charge: string };

      expect(provider.requests(providerKey)).toBe(requests);
      expect(provider.applied(providerKey)).toBe(1);
      expect(provider.charge(providerKey)?.id).toBe(result.charge);
      const { rows: orders } = await db.pool.query<{ id: string; charge_id: string | null }>(
        'SELECT id, charge_id FROM orders WHERE flow_key = $1',
        [key],
      );
      expect(orders).toEqual([{ id: String(result.order), charge_id: result.charge }]);
      const finished = await flowRow(key);
      expect(finished).toMatchObject({
        fence: point === 'before-answer' ? 1 : 2,
        status: 201,
        steps: [{ name: 'order' }, { name: 'charge' }, { name: 'record' }],
      });
      expect(JSON.parse(finished?.body ?? 'null')).toEqual(result);
      const again = await postCharge(survivorUrl, key, body);
      expect(again).toMatchObject({ status: 201, body: answer.body });
      expect(again.headers['idempotent-replayed']).toBe('true');
    },
  );
});
