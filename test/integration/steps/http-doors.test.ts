import { randomUUID } from 'node:crypto';
import { describe, expect, it } from '@jest/globals';
import { STEPS_FRAMEWORKS } from '../../../kit/steps/server.js';
import { postCharge, stepsFixture } from './support.js';

const fixture = stepsFixture('steps_http');

describe.each(STEPS_FRAMEWORKS)('%s: a flow behind an Idempotency-Key route', (framework) => {
  it('runs the steps once, stores the answer, and replays it to a retry', async () => {
    const server = await fixture.start({ framework });
    const key = randomUUID();
    const first = await postCharge(server.url, key, { customer: 'c1', amount: 1200 });
    expect(first.status).toBe(201);
    const body = JSON.parse(first.body) as { order: number; charge: string };
    expect(body.charge).toMatch(/^ch_/);

    const again = await postCharge(server.url, key, { customer: 'c1', amount: 1200 });
    expect(again.status).toBe(201);
    expect(JSON.parse(again.body)).toEqual(body);
    expect(again.headers['idempotent-replayed']).toBe('true');

    const orders = await fixture.orders(key);
    expect(orders).toEqual([{ id: body.order, charge_id: body.charge }]);
    const charged = [...fixture.provider().appliedByKey()].filter(([, n]) => n > 0);
    expect(
      charged.filter(([k]) => fixture.provider().charge(k)?.request.order === body.order),
    ).toHaveLength(1);
    const row = await fixture.flowRow(key);
    expect(row?.steps.map((s) => `${s.kind} ${s.name}`)).toEqual([
      'step order',
      'call charge',
      'step record',
    ]);
    expect(row?.status).toBe(201);
  });

  it('refuses the key reused with another body (422), running nothing', async () => {
    const server = await fixture.start({ framework });
    const key = randomUUID();
    expect((await postCharge(server.url, key, { customer: 'c2', amount: 1 })).status).toBe(201);
    const reused = await postCharge(server.url, key, { customer: 'c2', amount: 2 });
    expect(reused.status).toBe(422);
    expect(JSON.parse(reused.body)).toMatchObject({ code: 'EO_IDEMPOTENCY_KEY_REUSED' });
    expect(await fixture.orders(key)).toHaveLength(1);
  });
});
