/**
 * The layout rules `npm run lint` checks (dependency-cruiser.config.js) catch what they
 * forbid: violations planted in a scratch tree shaped like this repo (src/, adapters/,
 * a tsconfig, the repo's node_modules) are reported, each by its rule, and the imports
 * the rules allow beside them are not. depcruise runs as `npm run lint` runs it.
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';

const repoRoot = path.resolve(import.meta.dirname, '../../..');

/** The planted tree: file → its text. */
const PLANTED: Record<string, string> = {
  // Optional peers imported from src/, type-only imports included.
  'src/http/framework.ts': "import type { Request } from 'express';\nexport type R = Request;\n",
  'src/http/plugin.ts':
    "import type { FastifyInstance } from 'fastify';\nexport type F = FastifyInstance;\n",
  'src/outbox/sqs.ts': "export const load = () => import('@aws-sdk/client-sqs');\n",
  'src/outbox/kafka.ts': "import type { Producer } from 'kafkajs';\nexport type P = Producer;\n",
  'src/consumer/platformatic.ts':
    "import type { Producer } from '@platformatic/kafka';\nexport type P = Producer<Buffer, Buffer, Buffer, Buffer>;\n",
  'src/store/kysely.ts': "import type { Kysely } from 'kysely';\nexport type K = Kysely<object>;\n",
  // OpenTelemetry outside src/otel/, and inside it (allowed).
  'src/consumer/tracing.ts':
    "import { trace } from '@opentelemetry/api';\nexport const t = trace;\n",
  'src/otel/tracing.ts': "import { trace } from '@opentelemetry/api';\nexport const t = trace;\n",
  // The seam of the framework adapters: the kit (allowed), and a deep import past it.
  'src/http/engine.ts': 'export const engine = 1;\n',
  'src/http/framework-kit.ts': "export { engine } from './engine.js';\n",
  'adapters/express/index.ts':
    "import type { Request } from 'express';\nimport { engine } from '../../src/http/framework-kit.js';\nexport type R = Request;\nexport const e = engine;\n",
  'adapters/fastify/index.ts':
    "import { engine } from '../../src/http/engine.js';\nexport const e = engine;\n",
  // A broker adapter may import its peer and any of src/.
  'adapters/sqs/publisher.ts':
    "import type { SQSClient } from '@aws-sdk/client-sqs';\nimport { engine } from '../../src/http/engine.js';\nexport type C = SQSClient;\nexport const e = engine;\n",
};

interface Violation {
  from: string;
  to: string;
  rule: { name: string };
}

let scratch: string;
let violations: Violation[];

beforeAll(async () => {
  scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'eo-layout-'));
  for (const [file, text] of Object.entries(PLANTED)) {
    fs.mkdirSync(path.dirname(path.join(scratch, file)), { recursive: true });
    fs.writeFileSync(path.join(scratch, file), text);
  }
  fs.writeFileSync(
    path.join(scratch, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: { module: 'NodeNext', moduleResolution: 'NodeNext', strict: true },
      include: ['src', 'adapters'],
    }),
  );
  fs.symlinkSync(path.join(repoRoot, 'node_modules'), path.join(scratch, 'node_modules'), 'dir');
  const depcruise = path.join(repoRoot, 'node_modules', '.bin', 'depcruise');
  const config = path.join(repoRoot, 'dependency-cruiser.config.js');
  // depcruise exits non-zero when it found violations: the report is what counts.
  const { stdout } = await promisify(execFile)(
    depcruise,
    ['src', 'adapters', '--config', config, '--output-type', 'json'],
    { cwd: scratch, maxBuffer: 64 * 1024 * 1024 },
  ).catch((error: { stdout?: string }) => ({ stdout: error.stdout ?? '' }));
  violations = (JSON.parse(stdout) as { summary: { violations: Violation[] } }).summary.violations;
}, 60_000);

afterAll(() => {
  if (scratch !== undefined) fs.rmSync(scratch, { recursive: true, force: true });
});

const by = (rule: string): string[] =>
  violations
    .filter((v) => v.rule.name === rule)
    .map((v) => v.from)
    .sort();

describe('dependency-cruiser.config.js on planted violations', () => {
  it('src/ imports no express, fastify, @aws-sdk/*, kafkajs, @platformatic/* or a data layer', () => {
    expect(by('src-imports-no-bridged-peer')).toEqual([
      'src/consumer/platformatic.ts',
      'src/http/framework.ts',
      'src/http/plugin.ts',
      'src/outbox/kafka.ts',
      'src/outbox/sqs.ts',
      'src/store/kysely.ts',
    ]);
  });

  it('@opentelemetry/api is imported only in src/otel/', () => {
    expect(by('otel-only-in-src-otel')).toEqual(['src/consumer/tracing.ts']);
  });

  it('the framework adapters reach src/ only through src/http/framework-kit.ts', () => {
    expect(by('framework-adapters-through-the-kit')).toEqual(['adapters/fastify/index.ts']);
  });

  it('reports nothing else: the allowed imports beside them pass', () => {
    const expected = new Set([
      'src-imports-no-bridged-peer',
      'otel-only-in-src-otel',
      'framework-adapters-through-the-kit',
    ]);
    expect(violations.filter((v) => !expected.has(v.rule.name))).toEqual([]);
    expect(violations).toHaveLength(8);
  });
});
