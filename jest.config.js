/* global process */
// Jest runs in native ESM mode (p-limit is ESM-only), with ts-jest transpiling.
// Two projects: unit tests need no services; integration tests get Postgres,
// an SQS emulator and a Kafka broker from test/helpers/global-setup.ts.

const common = {
  // Which files run one at a time beside the others, and which alone: see the runner.
  runner: '<rootDir>/test/helpers/lane-runner.js',
  extensionsToTreatAsEsm: ['.ts'],
  testEnvironment: 'node',
  moduleNameMapper: {
    '^effectively-once$': '<rootDir>/src/index.ts',
    '^effectively-once/sqs$': '<rootDir>/adapters/sqs/index.ts',
    '^effectively-once/kafka$': '<rootDir>/adapters/kafka/index.ts',
    '^effectively-once/kafka/platformatic$': '<rootDir>/adapters/kafka/platformatic/index.ts',
    '^effectively-once/testing$': '<rootDir>/src/testing/index.ts',
    '^effectively-once/client$': '<rootDir>/src/client/index.ts',
    '^effectively-once/http$': '<rootDir>/src/http/index.ts',
    '^effectively-once/http/express$': '<rootDir>/adapters/express/index.ts',
    '^effectively-once/http/fastify$': '<rootDir>/adapters/fastify/index.ts',
    '^effectively-once/outbox$': '<rootDir>/src/outbox/index.ts',
    '^effectively-once/otel$': '<rootDir>/src/otel/index.ts',
    '^effectively-once/typeorm$': '<rootDir>/adapters/typeorm/index.ts',
    '^effectively-once/kysely$': '<rootDir>/adapters/kysely/index.ts',
    '^effectively-once/lambda$': '<rootDir>/adapters/lambda/index.ts',
    '^effectively-once/drizzle$': '<rootDir>/adapters/drizzle/index.ts',
    '^effectively-once/postgres-js$': '<rootDir>/adapters/postgres-js/index.ts',
    '^effectively-once/prisma$': '<rootDir>/adapters/prisma/index.ts',
    '^effectively-once/knex$': '<rootDir>/adapters/knex/index.ts',
    '^effectively-once/rabbitmq$': '<rootDir>/adapters/rabbitmq/index.ts',
    '^effectively-once/nestjs$': '<rootDir>/adapters/nestjs/index.ts',
    '^(\\.{1,2}/.*)\\.js$': '$1',
  },
  transform: {
    '^.+\\.ts$': ['ts-jest', { useESM: true, tsconfig: '<rootDir>/tsconfig.json' }],
  },
};

// The chaos helpers' self-test restarts the shared Postgres and Kafka, which breaks every
// test file running beside it: it runs alone, as its own step of .ci/run (EO_CHAOS=1).
const alone = process.env.EO_CHAOS === '1' ? [] : ['/test/integration/services-chaos\\.test\\.ts$'];

// @platformatic/kafka needs Node >= 22.22 (or >= 24.6): on an older Node its tests are left
// out here, not skipped inside, and .ci/run runs them in its Node 22 and 24 passes.
const [major = 0, minor = 0] = process.versions.node.split('.').map(Number);
const platformaticRuns =
  major > 24 || (major === 24 && minor >= 6) || (major === 22 && minor >= 22);
const needsNewNode = platformaticRuns ? [] : ['/test/integration/kafka-platformatic/'];

// A `*.pg17.test.ts` file needs Postgres 17+ (transaction_timeout): left out here, not
// skipped inside, unless EO_PG_VERSION asks for 17 or later (.ci/run's Postgres 18 pass).
const needsNewPostgres =
  Number(process.env.EO_PG_VERSION ?? 0) >= 17 ? [] : ['/test/integration/.*\\.pg17\\.test\\.ts$'];

// test/integration/pgbouncer/ needs PgBouncer (a Debian package, not on every machine):
// only with EO_VIA_PGBOUNCER=1, .ci/run's PgBouncer step, which global setup starts it for.
const needsPgBouncer = process.env.EO_VIA_PGBOUNCER === '1' ? [] : ['/test/integration/pgbouncer/'];

// test/integration/rabbitmq/ needs a RabbitMQ node (Debian's rabbitmq-server, not on every
// machine): only when EO_SERVICES lists rabbitmq, which global setup then starts, or a
// RABBITMQ_URL is given. .ci/run's main suite lists it.
const rabbitmqAsked =
  (process.env.EO_SERVICES ?? '').split(',').some((s) => s.trim() === 'rabbitmq') ||
  Boolean(process.env.RABBITMQ_URL);
const needsRabbitMq = rabbitmqAsked ? [] : ['/test/integration/rabbitmq/'];

/** @type {import('jest').Config} */
export default {
  // Jest reads testTimeout only at the top level; integration tests need broker round trips.
  testTimeout: 120_000,
  // Jest's default (cores - 1) unless EO_JEST_WORKERS says otherwise: a 2-core CI machine
  // runs the suite in band. Two workers there (the heavy files in a lane of their own, see
  // test/helpers/lane-runner.js) are to be validated on a quiet machine before they become
  // the default: under load they were not told apart from the load's own failures.
  ...(process.env.EO_JEST_WORKERS !== undefined
    ? { maxWorkers: Number(process.env.EO_JEST_WORKERS) }
    : {}),
  projects: [
    { ...common, displayName: 'unit', testMatch: ['<rootDir>/test/unit/**/*.test.ts'] },
    {
      ...common,
      displayName: 'integration',
      testMatch: ['<rootDir>/test/integration/**/*.test.ts'],
      testPathIgnorePatterns: [
        '/node_modules/',
        ...alone,
        ...needsNewNode,
        ...needsNewPostgres,
        ...needsPgBouncer,
        ...needsRabbitMq,
      ],
      globalSetup: '<rootDir>/test/helpers/global-setup.ts',
      globalTeardown: '<rootDir>/test/helpers/global-teardown.ts',
    },
  ],
};
