/**
 * `npm run compare`: effectively-once's HTTP door against the Idempotency-Key
 * middlewares people pick instead, on the same Express 5 app and the same Postgres,
 * under the same crashes (docs/comparison.md has the table and what it means).
 *
 *   npm run compare -- [--contenders a,b] [--payments 100] [--concurrent 20]
 *                      [--out bench/results/compare-http]
 *
 * Uses DATABASE_URL, or starts a private Postgres (test/helpers/services). Prints the
 * table as markdown and writes it (with the raw figures as JSON) to `--out`.md/.json.
 * Exits 1 when effectively-once's figures are not 0 doubles / 0 stuck (or any run failed).
 */
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { ensureServices } from '../../chaos/services.js';
import { GIVE_UP_MS } from './client.js';
import { CONTENDERS, isContender } from './contenders.js';
import { effectivelyOnceFailures, markdownTable } from './report.js';
import { runContender, type ContenderResult } from './scenario.js';

const say = (line: string): void => console.error(`[compare] ${line}`);

const { values } = parseArgs({
  options: {
    contenders: { type: 'string', default: CONTENDERS.join(',') },
    payments: { type: 'string', default: '100' },
    concurrent: { type: 'string', default: '20' },
    out: { type: 'string', default: 'bench/results/compare-http' },
  },
});
const contenders = values.contenders.split(',').map((name) => {
  if (!isContender(name))
    throw new Error(`--contenders: unknown ${name} (known: ${CONTENDERS.join(', ')})`);
  return name;
});
const payments = positive('payments', values.payments);
const concurrent = positive('concurrent', values.concurrent);

const services = await ensureServices(null, say);
const pool = new pg.Pool({ connectionString: services.databaseUrl, max: 4 });
const results: ContenderResult[] = [];
let exitCode = 0;
try {
  const runId = Date.now().toString(36);
  for (const contender of contenders) {
    say(`${contender}: ${payments} payments, then ${concurrent} identical at once`);
    results.push(
      await runContender(contender, {
        pool,
        databaseUrl: services.databaseUrl,
        runId,
        payments,
        concurrent,
        log: say,
      }),
    );
  }
  const versions = packageVersions([
    'effectively-once',
    'express-idempotency',
    '@node-idempotency/core',
  ]);
  const { rows } = await pool.query<{ v: string }>("SELECT current_setting('server_version') AS v");
  const command = `npm run compare -- --payments ${payments} --concurrent ${concurrent}${values.contenders === CONTENDERS.join(',') ? '' : ` --contenders ${values.contenders}`}`;
  const markdown = [
    `\`${command}\` — ${new Date().toISOString().slice(0, 10)}, Node ${process.version}, Postgres ${rows[0]?.v ?? '?'}, Express ${packageVersions(['express'])['express']}; @node-idempotency/storage-adapter-memory ${packageVersions(['@node-idempotency/storage-adapter-memory'])['@node-idempotency/storage-adapter-memory']}.`,
    `Per contender: ${payments} sequential payments (${results[0]?.killed.payments ?? 0} killed right after the charge's COMMIT, ${results[0]?.dropped.payments ?? 0} with the answer dropped and the server alive), each client retrying its key until a 2xx or ${GIVE_UP_MS / 1000} s; then ${concurrent} identical requests at once.`,
    '',
    markdownTable(results, versions, concurrent),
    '',
  ].join('\n');
  console.log(markdown);
  fs.mkdirSync(path.dirname(values.out), { recursive: true });
  fs.writeFileSync(`${values.out}.md`, markdown);
  fs.writeFileSync(`${values.out}.json`, `${JSON.stringify({ command, results }, null, 2)}\n`);
  say(`wrote ${values.out}.md and .json`);
  for (const result of results.filter((r) => r.contender === 'effectively-once')) {
    const failures = effectivelyOnceFailures(result);
    for (const failure of failures) say(`FAIL effectively-once: ${failure}`);
    if (failures.length > 0) exitCode = 1;
  }
} catch (error) {
  say(`run failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
  exitCode = 1;
} finally {
  await pool.end();
  await services.stop();
}
process.exit(exitCode);

function positive(name: string, value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new Error(`--${name} must be a positive integer`);
  return n;
}

function packageVersions(names: string[]): Record<string, string> {
  const versions: Record<string, string> = {};
  for (const name of names) {
    const file = name === 'effectively-once' ? 'package.json' : `node_modules/${name}/package.json`;
    versions[name] = (JSON.parse(fs.readFileSync(file, 'utf8')) as { version: string }).version;
  }
  return versions;
}
