/**
 * The CLI on the bench's dedup history (issue 15): loads `--rows` rows (default 10
 * million) with the dedup-growth runs' loader (history.ts), then runs the BUILT bin's
 * read-only commands against it, each twice (the first reads from disk what the second
 * finds cached), and prints each command's output and wall time (node start included).
 *
 *   npm run build && npx tsx bench/cli-stats.ts [--rows 10000000] [--keep]
 *
 * Uses DATABASE_URL, or starts Postgres as the integration tests do. The history is
 * dropped at the end unless --keep. Results: bench/results/cli-stats.md.
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs, promisify } from 'node:util';
import { dropHistory, HISTORY_SCHEMA, preloadHistory } from './history.js';
import { ensureServices } from './services.js';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const bin = path.join(repoRoot, 'dist', 'src', 'cli', 'main.js');

const { values } = parseArgs({
  options: { rows: { type: 'string', default: '10000000' }, keep: { type: 'boolean' } },
});
const rows = Number(values.rows);
if (!Number.isSafeInteger(rows) || rows < 1) throw new Error(`--rows ${values.rows}: not a count`);
if (!fs.existsSync(bin)) throw new Error(`${bin} is missing: run \`npm run build\` first`);

const services = await ensureServices(null);
const { databaseUrl } = services.endpoints;
const stop = (): Promise<void> => services.stop();

const commands = [
  ['--help'], // node's start and the CLI's imports, without a database: the floor of every time
  ['stats', '--window', '7d'],
  ['stats', '--estimate', '--window', '7d'],
  ['stats', '--consumer', 'bench'],
  ['prune', '--older-than', '7d', '--dry-run'],
  ['inspect', `msg-${Math.ceil(rows / 2)}-h`, '--consumer', 'bench'],
];

const report: string[] = [];
try {
  await preloadHistory(databaseUrl, rows, 'kafka');
  const run = promisify(execFile);
  for (const args of commands) {
    const argv = args[0] === '--help' ? [bin, ...args] : [bin, ...args, '--schema', HISTORY_SCHEMA];
    const seconds: string[] = [];
    let output = '';
    for (let attempt = 0; attempt < 2; attempt++) {
      const started = performance.now();
      const result = await run(process.execPath, argv, { env: process.env }).catch(
        (error: Error & { stdout?: string; stderr?: string; code?: number }) => ({
          stdout: `${error.stdout ?? ''}${error.stderr ?? ''}(exit ${error.code})`,
        }),
      );
      seconds.push(((performance.now() - started) / 1000).toFixed(2));
      output = args[0] === '--help' ? '(help text)' : result.stdout.trimEnd();
    }
    const line = `$ effectively-once ${argv.slice(1).join(' ')}`;
    const times = `# ${seconds[0]} s, then ${seconds[1]} s`;
    console.log(`${line}   ${times}\n${output}\n`);
    report.push('```console', `${line}   ${times}`, output, '```', '');
  }
  const out = path.join(repoRoot, 'bench', 'results', 'cli-stats.md');
  fs.writeFileSync(
    out,
    [
      `# The CLI on a ${rows.toLocaleString('en-US')}-row dedup table`,
      '',
      `\`npx tsx bench/cli-stats.ts --rows ${rows}\` (${new Date().toISOString().slice(0, 10)}, Node ${process.version}; ` +
        'the history of bench/README.md "Dedup table growth": one consumer, 30 to 1 days old). ' +
        'Times are wall clock of the whole process, node start included, on a machine with ' +
        `${os.cpus().length} cores and a load average of ${os.loadavg()[0]?.toFixed(1)} at the end ` +
        '(shared: other processes ran beside it).',
      '',
      ...report,
    ].join('\n'),
  );
  console.log(`[bench] wrote ${path.relative(repoRoot, out)}`);
} finally {
  if (!values.keep) await dropHistory(databaseUrl).catch((e: unknown) => console.error(e));
  await stop();
}
