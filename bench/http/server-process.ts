/**
 * The HTTP bench's server process, seen from the parent: the library built as users get
 * it, the server started on it (optionally under V8's CPU profiler), its CPU time read.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { LayerName } from '../../kit/data-layers/index.js';

/**
 * The server runs the library as users do, compiled (tsc, `npm run build`): resolved
 * through package.json's exports to dist/ instead of tsconfig's paths to src/, whose
 * on-the-fly transform adds a helper call per function created.
 */
export function buildLibrary(): void {
  const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
  const built = spawnSync(npm, ['run', '--silent', 'build'], { stdio: 'inherit' });
  if (built.status !== 0) throw new Error(`npm run build failed (${built.status ?? built.signal})`);
}

export function startServer(
  url: string,
  schema: string,
  pool: number,
  profileDir: string | null,
  /** `POST /eo` through this data layer (server.ts); absent: the door's own pg client. */
  dataLayer?: LayerName,
  /**
   * Another server script printing the same first line (default ./server.ts), its extra
   * env, and `fromSource`: the library from src/ through tsconfig's paths, no build
   * needed (smoke runs only: its figures are not the compiled library's).
   */
  other: { entry?: string; env?: Record<string, string>; fromSource?: boolean } = {},
): Promise<{ port: number; child: ChildProcess }> {
  const entry = other.entry ?? fileURLToPath(new URL('./server.ts', import.meta.url));
  const profile = profileDir === null ? [] : ['--cpu-prof', '--cpu-prof-dir', profileDir];
  const child = spawn(process.execPath, [...profile, '--import', 'tsx', entry], {
    env: {
      ...process.env,
      ...(other.fromSource === true
        ? {}
        : { TSX_TSCONFIG_PATH: fileURLToPath(new URL('./tsconfig.dist.json', import.meta.url)) }),
      BENCH_DATABASE_URL: url,
      BENCH_SCHEMA: schema,
      BENCH_POOL: String(pool),
      ...(dataLayer === undefined ? {} : { BENCH_DATA_LAYER: dataLayer }),
      ...other.env,
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  return new Promise((resolve, reject) => {
    child.once('exit', (code) =>
      reject(new Error(`bench server exited (${code}) before listening`)),
    );
    createInterface({ input: child.stdout }).once('line', (line) => {
      const { port, library } = JSON.parse(line) as { port: number; library: string };
      if (!library.includes('/dist/') && other.fromSource !== true) {
        child.kill('SIGTERM');
        reject(new Error(`bench server loaded the library from ${library}, not the build`));
      } else resolve({ port, child });
    });
  });
}

/** CPU time the server process used so far, in ms (Linux /proc; null elsewhere). */
export function cpuMs(pid: number | undefined): number | null {
  try {
    const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
    // utime and stime, fields 14 and 15 of stat (11 and 12 after the command), in ticks of 10 ms.
    return (Number(fields[11]) + Number(fields[12])) * 10;
  } catch {
    return null;
  }
}
