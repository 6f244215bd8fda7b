import { afterAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { consumerFailures } from '../../bench/compare/consumer/report.js';
import {
  runConsumerContender,
  type ConsumerScenarioOptions,
} from '../../bench/compare/consumer/scenario.js';
import { databaseUrl, kafkaBrokers, sqsEndpoint } from '../helpers/env.js';

// `npm run compare -- --side consumer` in small: 10 messages per contender, 2 of them
// killing the worker right after the payment's commit and before sqs-consumer's delete
// / kafkajs's offset commit. The plain workers are the negative control: the crash
// point is reached only after the commit, so each kill must double its payment, or
// the zeros for effectively-once would prove nothing.
const pool = new pg.Pool({ connectionString: databaseUrl(), max: 4 });
const options: ConsumerScenarioOptions = {
  pool,
  databaseUrl: databaseUrl(),
  sqsEndpoint: sqsEndpoint(),
  kafkaBrokers: kafkaBrokers(),
  runId: `smoke${Date.now().toString(36)}`,
  messages: 10,
  log: () => undefined,
};

afterAll(() => pool.end());

describe('npm run compare -- --side consumer (smoke)', () => {
  it.each(['sqs-consumer+withDedup', 'kafkajs+exactlyOnceEachMessage'] as const)(
    '%s: both kills land after the commit, no double, nothing lost',
    async (contender) => {
      const result = await runConsumerContender(contender, options);
      expect(result.kills).toBe(2);
      expect(consumerFailures(result)).toEqual([]);
    },
  );

  it.each(['sqs-consumer', 'kafkajs'] as const)(
    '%s alone: the same kills double both payments, and nothing else',
    async (contender) => {
      const result = await runConsumerContender(contender, options);
      expect(result.kills).toBe(2);
      expect(result.killed).toEqual({ messages: 2, doubles: 2, lost: 0 });
      expect(result.plain).toEqual({ messages: 8, doubles: 0, lost: 0 });
      expect(result.backlog).toBe(0);
    },
  );
});
