// The layout ARCHITECTURE.md describes, checked by `npm run lint` (`depcruise`): a core
// (the primitives at the top of src/, the SQL in store/, the transaction in tx/), three
// doors on it (consumer/, http/, outbox/), the caller's client/ (which the outbox's HTTP
// publisher uses), around them otel/, cli/ and testing/, and in adapters/ every bridge to
// a third-party package (SQS, Kafka, @platformatic/kafka, Express, Fastify, Kysely).
// Type-only imports count: a circle of types is a circle of ideas, and `import type`
// must not be the way one is hidden.
const DOORS = 'consumer|http|outbox';
const AROUND = 'client|otel|cli|testing';
// The optional peer dependencies: only adapters/ (and, for OpenTelemetry, src/otel/) may
// import them, so a user without the peer can import every other entry point. A path
// matches the package resolved (under node_modules/, its @types/ included) and, when it
// is not installed, the bare name.
const peer = (names) => `(^|node_modules/)(@types/)?(${names})(/|$)`;
const BRIDGED_PEERS = peer(
  'express|fastify|kafkajs|@aws-sdk|@platformatic|typeorm|kysely|drizzle-orm|postgres|@prisma|knex|aws-lambda|@middy|amqplib|@nestjs|rxjs',
);
const OTEL = peer('@opentelemetry');

/** @type {import('dependency-cruiser').IConfiguration} */
export default {
  forbidden: [
    {
      name: 'no-circular',
      comment: 'An import circle: put what both sides need below both of them.',
      severity: 'error',
      from: { path: '^(src|adapters)/' },
      to: { circular: true },
    },
    {
      name: 'src-knows-no-broker',
      comment: 'src/ never imports adapters/: own or register the thing in src/ instead.',
      severity: 'error',
      from: { path: '^src/' },
      to: { path: '^adapters/' },
    },
    {
      name: 'door-to-door',
      comment: 'A door does not import another door: move what both use into the core.',
      severity: 'error',
      from: { path: `^src/(${DOORS})/` },
      to: { path: `^src/(${DOORS})/`, pathNot: '^src/$1/' },
    },
    {
      name: 'client-imports-no-door',
      comment: "The caller's client is its own entry point: it needs no door.",
      severity: 'error',
      from: { path: '^src/client/' },
      to: { path: `^src/(${DOORS})/` },
    },
    {
      name: 'core-imports-no-door',
      comment: 'The core (store/, tx/, the top-level primitives) sits below every door.',
      severity: 'error',
      from: { path: '^src/(store/|tx/|[^/]+[.]ts$)', pathNot: '^src/index[.]ts$' },
      to: { path: `^src/(${DOORS}|${AROUND})/` },
    },
    {
      name: 'tooling-imports-no-test',
      comment:
        'bench/, chaos/ and the kit they share (kit/) never import test/: what a harness and a test both need lives in kit/.',
      severity: 'error',
      from: { path: '^(bench|chaos|kit)/' },
      to: { path: '^test/' },
    },
    {
      name: 'kit-imports-no-harness',
      comment:
        'kit/ is what the harnesses share: it imports no harness (bench/, chaos/), or it would not be shared.',
      severity: 'error',
      from: { path: '^kit/' },
      to: { path: '^(bench|chaos)/' },
    },
    {
      name: 'src-imports-no-bridged-peer',
      comment:
        'express, fastify, @aws-sdk/*, kafkajs, @platformatic/*, typeorm, kysely, drizzle-orm, postgres, @prisma/*, knex and amqplib are optional peers: ' +
        'the bridge to one lives in adapters/, typed structurally in src/ when src/ needs it.',
      severity: 'error',
      from: { path: '^src/' },
      to: { path: BRIDGED_PEERS },
    },
    {
      name: 'otel-only-in-src-otel',
      comment:
        '@opentelemetry/api is an optional peer: only src/otel/ (effectively-once/otel) imports it.',
      severity: 'error',
      from: { path: '^src/', pathNot: '^src/otel/' },
      to: { path: OTEL },
    },
    {
      name: 'framework-adapters-through-the-kit',
      comment:
        'adapters/express and adapters/fastify reach src/ only through src/http/framework-kit.ts: ' +
        'add what they need there.',
      severity: 'error',
      from: { path: '^adapters/(express|fastify)/' },
      to: { path: '^src/', pathNot: '^src/http/framework-kit[.]ts$' },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsConfig: { fileName: 'tsconfig.json' },
    tsPreCompilationDeps: true,
  },
};
