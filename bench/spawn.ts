import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { ChildReply, RunResult, ScenarioTask } from './protocol.js';

const CHILD = fileURLToPath(new URL('./child.ts', import.meta.url));
const running = new Set<ReturnType<typeof fork>>();

/**
 * Runs one scenario in a fresh process. `fork` inherits `process.execArgv`, which holds
 * tsx's loader when main.ts runs under tsx, so the child runs TypeScript too.
 */
export function runInChild(
  task: ScenarioTask,
  timeoutMs: number,
  profileDir?: string,
): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const profile =
      profileDir === undefined
        ? []
        : // One directory per run: tsx's loader thread writes a profile of its own next to the main thread's.
          [
            '--cpu-prof',
            `--cpu-prof-dir=${profileDir}/${task.broker}-${task.scenario}-r${task.round}`,
          ];
    const child = fork(CHILD, [], {
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      execArgv: [...process.execArgv, ...profile],
    });
    running.add(child);
    let reply: ChildReply | undefined;
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(
        new Error(`scenario ${task.scenario} round ${task.round} timed out after ${timeoutMs} ms`),
      );
    }, timeoutMs);
    child.on('message', (message: ChildReply) => (reply = message));
    child.on('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      running.delete(child);
      if (reply?.ok === true) resolve(reply.result);
      else if (reply?.ok === false) reject(new Error(reply.error));
      else
        reject(
          new Error(`scenario process exited (code ${code}, signal ${signal}) without a result`),
        );
    });
    child.send(task);
  });
}

/** Kills scenario processes still running (Ctrl-C in the parent). */
export function killChildren(): void {
  for (const child of running) child.kill('SIGKILL');
}
