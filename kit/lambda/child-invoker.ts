import { type ChildProcess, fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { SQSEvent } from 'aws-lambda';
import type { Invocation, Invoker } from './invoker.js';
import type { FromRuntime, ToRuntime } from './runtime-protocol.js';

const INIT_TIMEOUT_MS = 60_000;
const RUNTIME = fileURLToPath(new URL('./runtime-child.ts', import.meta.url));

/**
 * Runs the function's module in a child process, as Lambda runs it in an execution
 * environment: initialised once, reused across invocations, and replaced (a cold start)
 * when it died or timed out, which Lambda answers as a failed invocation: nothing of the
 * batch is deleted. The module may kill its own process to play a crash.
 */
export class ChildInvoker implements Invoker {
  private child: ChildProcess | undefined;
  private ready: Promise<void> | undefined;
  private nextId = 1;
  /** Execution environments started (cold starts). */
  coldStarts = 0;

  constructor(
    private readonly modulePath: string,
    private readonly env: NodeJS.ProcessEnv = process.env,
    private readonly output: NodeJS.WritableStream = process.stderr,
  ) {}

  async invoke(event: SQSEvent, timeoutMs: number): Promise<Invocation> {
    let child: ChildProcess;
    try {
      child = await this.environment();
    } catch (error) {
      return { kind: 'failed', reason: `init failed: ${String(error)}` };
    }
    // As Lambda's: the timeout starts after the init phase (which has its own limit).
    const deadline = Date.now() + timeoutMs;
    const id = this.nextId++;
    return new Promise<Invocation>((resolve) => {
      const end = (invocation: Invocation): void => {
        clearTimeout(timer);
        child.off('message', onMessage);
        child.off('exit', onExit);
        resolve(invocation);
      };
      const onMessage = (message: FromRuntime): void => {
        if (message.type === 'answer' && message.id === id)
          end({ kind: 'answered', response: message.response });
        else if (message.type === 'error' && message.id === id)
          end({ kind: 'failed', reason: `threw: ${message.message}` });
      };
      const onExit = (code: number | null, signal: string | null): void =>
        end({ kind: 'failed', reason: `runtime exited (code ${code}, signal ${signal})` });
      // Lambda stops a function at its timeout and starts a fresh environment next time.
      const timer = setTimeout(
        () => {
          this.kill();
          end({ kind: 'failed', reason: `timed out after ${timeoutMs} ms` });
        },
        Math.max(0, deadline - Date.now()),
      );
      child.on('message', onMessage);
      child.once('exit', onExit);
      const message: ToRuntime = { type: 'invoke', id, event, deadline };
      child.send(message);
    });
  }

  /** Kills the execution environment (SIGKILL), as Lambda does at a timeout. */
  kill(): void {
    this.child?.kill('SIGKILL');
    this.child = undefined;
    this.ready = undefined;
  }

  async close(): Promise<void> {
    const child = this.child;
    if (child === undefined) return;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    this.kill();
    await exited;
  }

  /** The live environment, or a new one once its module is initialised. */
  private async environment(): Promise<ChildProcess> {
    if (this.child !== undefined && this.ready !== undefined) {
      await this.ready;
      return this.child;
    }
    // fork inherits process.execArgv: tsx's loader, so the runtime runs TypeScript too.
    const child = fork(RUNTIME, [this.modulePath], {
      env: this.env,
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
      execArgv: withTsx(process.execArgv),
    });
    this.coldStarts++;
    child.stdout?.pipe(this.output, { end: false });
    child.stderr?.pipe(this.output, { end: false });
    this.child = child;
    child.once('exit', () => {
      if (this.child !== child) return;
      this.child = undefined;
      this.ready = undefined;
    });
    this.ready = new Promise<void>((resolve, reject) => {
      // Lambda's init phase may take 10 s; a loaded test machine compiling TypeScript, longer.
      const timer = setTimeout(() => reject(new Error('init timed out')), INIT_TIMEOUT_MS);
      child.on('message', (message: FromRuntime) => {
        if (message.type !== 'ready') return;
        clearTimeout(timer);
        resolve();
      });
      child.once('exit', (code, signal) => {
        clearTimeout(timer);
        reject(new Error(`runtime exited during init (code ${code}, signal ${signal})`));
      });
    });
    this.ready.catch(() => undefined);
    await this.ready;
    return child;
  }
}

/** The parent's exec arguments, with tsx's loader added when it is not there (jest runs without it). */
function withTsx(execArgv: ReadonlyArray<string>): string[] {
  const args = [...execArgv].filter((a) => !a.startsWith('--experimental-vm-modules'));
  const hasTsx = args.some((a, i) => a === 'tsx' && args[i - 1] === '--import');
  return hasTsx ? args : [...args, '--import', 'tsx'];
}
