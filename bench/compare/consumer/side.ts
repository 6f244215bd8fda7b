/**
 * `npm run compare -- --side consumer`: plain sqs-consumer and kafkajs workers against
 * the same workers wrapped by effectively-once, killed between the payment's commit
 * and the ack (scenario.ts), and their table. SQS contenders run with ElasticMQ,
 * Kafka ones with Kafka, one broker's services at a time.
 */
import type { BrokerName } from '../../../kit/services/private.js';
import {
  packageVersions,
  pickContenders,
  positive,
  postgresVersion,
  say,
  wasInterrupted,
  withServices,
  writeResults,
} from '../session.js';
import { CONSUMER_CONTENDERS, CONSUMER_LABELS } from './contenders.js';
import { consumerFailures, consumerTable } from './report.js';
import { runConsumerContender, SETTLE_MS, type ConsumerResult } from './scenario.js';
import { VISIBILITY_TIMEOUT_S } from './sqs-channel.js';

export interface ConsumerSideOptions {
  contenders?: string | undefined;
  messages: string;
  out: string;
}

/** Runs the consumer side; resolves with its failures (empty: effectively-once was clean). */
export async function runConsumerSide(values: ConsumerSideOptions): Promise<string[]> {
  const contenders = pickContenders(values.contenders, CONSUMER_CONTENDERS);
  const messages = positive('messages', values.messages);
  const runId = Date.now().toString(36);
  const results: ConsumerResult[] = [];
  let postgres = '?';
  for (const broker of ['sqs', 'kafka'] as const satisfies readonly BrokerName[]) {
    const mine = contenders.filter((c) => CONSUMER_LABELS[c].broker === broker);
    if (mine.length === 0 || wasInterrupted()) continue;
    await withServices(broker, async ({ pool, databaseUrl, brokerEndpoint }) => {
      postgres = await postgresVersion(pool);
      for (const contender of mine) {
        say(`${contender}: ${messages} messages, one at a time`);
        results.push(
          await runConsumerContender(contender, {
            pool,
            databaseUrl,
            ...(broker === 'sqs'
              ? { sqsEndpoint: brokerEndpoint }
              : { kafkaBrokers: brokerEndpoint.split(',') }),
            runId,
            messages,
            log: say,
          }),
        );
      }
    });
  }
  if (wasInterrupted()) return ['interrupted'];
  const versions = packageVersions(['effectively-once', 'sqs-consumer', 'kafkajs']);
  const all = contenders.length === CONSUMER_CONTENDERS.length;
  const command = `npm run compare -- --side consumer --messages ${messages}${all ? '' : ` --contenders ${contenders.join(',')}`}`;
  const killed = results[0]?.killed.messages ?? 0;
  const markdown = [
    `\`${command}\` — ${new Date().toISOString().slice(0, 10)}, Node ${process.version}, Postgres ${postgres}, ElasticMQ (SQS) and Kafka from kit/services.`,
    `Per contender: ${messages} payment messages sent one at a time, each waited for until deleted / its offset committed (up to ${SETTLE_MS / 1000} s); ${killed} of them SIGKILL the worker after the payment's commit and before the ack, and it is restarted. SQS visibility timeout ${VISIBILITY_TIMEOUT_S} s.`,
    '',
    consumerTable(results, versions),
    '',
  ].join('\n');
  console.log(markdown);
  writeResults(values.out, markdown, { command, results });
  return results
    .filter((r) => CONSUMER_LABELS[r.contender].effectivelyOnce)
    .flatMap((r) => consumerFailures(r).map((f) => `${r.contender}: ${f}`));
}
