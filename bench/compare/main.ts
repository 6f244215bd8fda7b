/**
 * `npm run compare`: effectively-once against what people pick instead, under the same
 * crashes (docs/comparison.md has the tables and what they mean).
 *
 *   npm run compare -- [--side http|consumer|all] [--contenders a,b] [--out prefix]
 *     http (the default): the Idempotency-Key middlewares on one Express 5 app
 *       [--payments 100] [--concurrent 20]      --out .cache/runs/compare/compare-http
 *     consumer: plain sqs-consumer / kafkajs workers vs withDedup / exactlyOnceEachMessage
 *       [--messages 100]                        --out .cache/runs/compare/compare-consumer
 *     all: both, each with its defaults (no --contenders / --out)
 *
 * Uses DATABASE_URL, SQS_ENDPOINT, KAFKA_BROKERS, or starts private ones
 * (kit/services) and stops them at the end, or on Ctrl-C. Prints each table as
 * markdown and writes it (with the raw figures as JSON) to `--out`.md/.json. Exits 1
 * when effectively-once's figures are not 0 doubles / 0 stuck / 0 lost (or a run
 * failed); 130 on SIGINT.
 */
import { choiceOption, UsageError } from '../../kit/args.js';
import { runDir } from '../../kit/results.js';
import { parseArgs } from 'node:util';
import { runConsumerSide } from './consumer/side.js';
import { runHttpSide } from './http-side.js';
import { say, stopOnSigint, wasInterrupted } from './session.js';

const SIDES = ['http', 'consumer', 'all'] as const;

const { values } = parseArgs({
  options: {
    side: { type: 'string' },
    contenders: { type: 'string' },
    payments: { type: 'string', default: '100' },
    concurrent: { type: 'string', default: '20' },
    messages: { type: 'string', default: '100' },
    out: { type: 'string' },
  },
});
const side = choiceOption('side', values.side, SIDES, 'http');
if (side === 'all' && (values.contenders !== undefined || values.out !== undefined))
  throw new UsageError(
    '--side all runs every contender with the default --out: pick a side for those',
  );

stopOnSigint();
let exitCode = 0;
try {
  const failures: string[] = [];
  if (side === 'http' || side === 'all')
    failures.push(
      ...(await runHttpSide({ ...values, out: values.out ?? `${runDir('compare')}/compare-http` })),
    );
  if (side === 'consumer' || side === 'all')
    failures.push(
      ...(await runConsumerSide({
        ...values,
        out: values.out ?? `${runDir('compare')}/compare-consumer`,
      })),
    );
  for (const failure of failures) say(`FAIL effectively-once: ${failure}`);
  if (failures.length > 0) exitCode = 1;
} catch (error) {
  say(`run failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
  exitCode = 1;
}
// After SIGINT, the handler exits (130) once the services are down.
if (!wasInterrupted()) process.exit(exitCode);
