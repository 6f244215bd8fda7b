import { describe, expect, it } from '@jest/globals';
import { consumerFailures, consumerTable } from '../../../bench/compare/consumer/report.js';
import type { ConsumerResult } from '../../../bench/compare/consumer/scenario.js';

function result(overrides: Partial<ConsumerResult> = {}): ConsumerResult {
  return {
    contender: 'sqs-consumer+withDedup',
    kills: 20,
    killed: { messages: 20, doubles: 0, lost: 0 },
    plain: { messages: 80, doubles: 0, lost: 0 },
    backlog: 0,
    seconds: 1,
    ...overrides,
  };
}

// The gate `npm run compare -- --side consumer` exits 1 on.
describe('npm run compare -- --side consumer: the verdict on effectively-once', () => {
  it('passes a clean run', () => {
    expect(consumerFailures(result())).toEqual([]);
  });

  it.each([
    ['a double', { killed: { messages: 20, doubles: 1, lost: 0 } }, /killed messages: 1 doubles/],
    ['a lost payment', { plain: { messages: 80, doubles: 0, lost: 1 } }, /not killed .* 1 lost/],
    ['a kill that never happened', { kills: 19 }, /19 of 20 armed kills/],
    ['a message never acked', { backlog: 1 }, /1 messages never settled/],
  ])('fails on %s', (_name, overrides, message) => {
    const failures = consumerFailures(result(overrides));
    expect(failures).toHaveLength(1);
    expect(failures[0]).toMatch(message);
  });

  it('prints what it measured, one row per contender', () => {
    const table = consumerTable(
      [result(), result({ contender: 'kafkajs', killed: { messages: 20, doubles: 20, lost: 0 } })],
      { 'effectively-once': '0.1.0', 'sqs-consumer': '14.2.8', kafkajs: '2.2.4' },
    );
    const rows = table.split('\n');
    expect(rows).toHaveLength(4);
    expect(rows[2]).toMatch(/^\| sqs-consumer 14\.2\.8 \+ effectively-once 0\.1\.0 \| .*withDedup/);
    expect(rows[3]).toMatch(/^\| kafkajs 2\.2\.4 \| .* \| 20\/20 \| 20 \| 0 \| 0 \| 0 \| 0 \|$/);
  });
});
