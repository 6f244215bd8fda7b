/**
 * `npm run demo`: the guarantee, live. With no environment it starts everything it
 * needs in-process (embedded Postgres, an SQS emulator); DATABASE_URL / SQS_ENDPOINT
 * point it at real services instead, and KAFKA_BROKERS selects the Kafka variant.
 *
 *   npm run demo -- --messages 2000 --seed 7
 *   npm run demo -- --http     # the HTTP side: Idempotency-Key endpoint, retrying callers
 */
import { parseArgs } from 'node:util';

// The AWS SDK warns once that future releases will need Node 22; not the demo's topic.
process.env['AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED'] ??= 'true';

const { values } = parseArgs({
  options: {
    messages: { type: 'string', short: 'n', default: '500' },
    seed: { type: 'string', default: '1' },
    http: { type: 'boolean', default: false },
    help: { type: 'boolean', short: 'h', default: false },
  },
});
if (values.help) {
  process.stdout.write(
    'usage: npm run demo -- [--messages N] [--seed S] [--http]\n' +
      '  --http: a payment API with the Idempotency-Key middleware, callers retrying through a flaky proxy\n' +
      '  env: DATABASE_URL, SQS_ENDPOINT (use these instead of the embedded ones), KAFKA_BROKERS (Kafka variant)\n',
  );
  process.exit(0);
}
const messages = Number(values.messages);
const seed = Number(values.seed);
if (!Number.isInteger(messages) || messages < 1 || messages > 100_000) {
  process.stderr.write('--messages must be an integer from 1 to 100000\n');
  process.exit(2);
}
if (!Number.isInteger(seed)) {
  process.stderr.write('--seed must be an integer\n');
  process.exit(2);
}

try {
  if (values.http) {
    const { runHttpDemo } = await import('./http-demo.js');
    process.exit((await runHttpDemo({ payments: messages, seed })) ? 0 : 1);
  }
  const { runDemo } = await import('./demo.js');
  const pass = await runDemo({ messages, seed, deadlineMs: 40_000 });
  process.exit(pass ? 0 : 1);
} catch (error) {
  process.stderr.write(
    `demo failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
  );
  process.exit(1);
}
