import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

/** Starts provider-child.ts; resolves once it listens. */
export function startProviderProcess(): Promise<{ url: string; child: ChildProcess }> {
  const entry = fileURLToPath(new URL('./provider-child.ts', import.meta.url));
  const child = spawn(process.execPath, ['--import', 'tsx', entry], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  return new Promise((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`provider exited (${code}) before listening`)));
    createInterface({ input: child.stdout }).once('line', (line) => {
      const { port } = JSON.parse(line) as { port: number };
      resolve({ url: `http://127.0.0.1:${port}`, child });
    });
  });
}
