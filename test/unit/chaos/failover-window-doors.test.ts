/**
 * The async failover window on the HTTP target (chaos/http/checker.ts, summary.ts): a
 * payment with no charge whose charge vanished with a dead primary is counted (lost=,
 * window_lost=) and fails nothing; a payment lost any other way still fails the run.
 */
import { describe, expect, it } from '@jest/globals';
import { checkHttp, type ChargeRow, type StoredRow } from '../../../chaos/http/checker.js';
import type { Answer, Payment, PaymentLog } from '../../../chaos/http/clients.js';
import { httpExitCode, type HttpRunResult } from '../../../chaos/http/summary.js';

const payments: Payment[] = ['pay-0', 'pay-1'].map((key) => ({
  key,
  tenant: 't0',
  body: { customerId: 'c', amountCents: 100 },
  duplicated: false,
}));

/** pay-0 charged and answered consistently; pay-1 answered 201 but without a charge. */
function verdictWith(excused: ReadonlySet<string> | undefined) {
  const answer: Answer = {
    status: 201,
    body: JSON.stringify({ id: '1', key: 'pay-0' }),
    location: null,
    contentType: 'application/json',
    chaos: null,
    omitted: null,
    replayed: false,
  };
  const log = (a: Answer): PaymentLog => ({
    answers: [a],
    attempts: 1,
    inProgress: 0,
    gaveUp: 0,
    unanswered: 0,
  });
  const charges: ChargeRow[] = [{ tenant: 't0', key: 'pay-0', ids: ['1'], amountCents: 100 }];
  const stored: StoredRow[] = [
    { scope: 't0', key: 'pay-0', status: 201, body: Buffer.from(answer.body) },
  ];
  return checkHttp({
    payments,
    logs: new Map([
      ['pay-0', log(answer)],
      ['pay-1', log({ ...answer, body: JSON.stringify({ id: '2', key: 'pay-1' }) })],
    ]),
    charges,
    chargesAfter: charges,
    stored,
    replayed: new Map([['pay-0', { ...answer, replayed: true }]]),
    ...(excused && { excused }),
  });
}

function exit(verdict: ReturnType<typeof verdictWith>): number {
  const none = { applied: 0, doubles: 0, lost: 0, crossScope: 0, mismatched: 0, problems: [] };
  return httpExitCode({
    verdict,
    faults: none,
    earlyAnswers: 0,
    timedOut: false,
    shortfalls: [],
  } as unknown as HttpRunResult);
}

describe('the async failover window on the HTTP target', () => {
  it('a lost payment whose charge vanished with a dead primary is counted, not failed', () => {
    const v = verdictWith(new Set(['t0/pay-1']));
    expect(v).toMatchObject({ applied: 1, lost: 1, windowLost: 1, problems: [] });
    expect(exit(v)).toBe(0);
  });

  it('a lost payment outside the window fails the run', () => {
    const v = verdictWith(new Set(['t0/pay-0']));
    expect(v).toMatchObject({ lost: 1, windowLost: 0 });
    expect(v.problems.join()).toMatch(/no charge \(lost\): 1/);
    expect(exit(v)).toBe(1);
  });

  it('without an excuse (sync) every loss fails the run', () => {
    const v = verdictWith(undefined);
    expect(v).toMatchObject({ lost: 1, windowLost: 0 });
    expect(exit(v)).toBe(1);
  });
});
