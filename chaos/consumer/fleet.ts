import { fork, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Rng } from '../../kit/rng.js';
import {
  WORKER_ENV,
  type FaultPoint,
  type FromWorker,
  type ToWorker,
  type WorkerConfig,
} from './protocol.js';

const WORKER = fileURLToPath(new URL('./worker.ts', import.meta.url));

/** How a worker process ended. */
export interface WorkerExit {
  slot: number;
  pid: number;
  code: number | null;
  signal: NodeJS.Signals | null;
  /** The fault point armed when it died of SIGKILL (it killed itself there). */
  armed: FaultPoint | undefined;
  /** The parent SIGKILLed it. */
  killedByParent: boolean;
}

interface Slot {
  index: number;
  child: ChildProcess | undefined;
  ready: boolean;
  armed: FaultPoint | undefined;
  killedByParent: boolean;
  exited: Promise<WorkerExit> | undefined;
}

/**
 * W worker slots, each running one worker process at a time. A worker that dies
 * (SIGKILL, a failed start while Postgres is down, a receive loop that gave up) is
 * started again after a short random pause until `stop()`. Output goes to `logFile`.
 * `script` is the child's entry point (default worker.ts); it gets `config(slot)` as
 * JSON in CHAOS_WORKER and speaks the protocol.ts messages (the outbox target's
 * processes reuse the fleet this way).
 */
export class Fleet<C extends object = WorkerConfig> {
  private readonly slots: Slot[] = [];
  private stopping = false;
  private readonly log: fs.WriteStream;
  readonly exits: WorkerExit[] = [];
  /** The workers' `failed` / `dead-lettered` events by error code (a killed worker's last second is missing). */
  readonly events = { failed: new Map<string, number>(), deadLettered: new Map<string, number>() };
  spawned = 0;

  constructor(
    private readonly config: (index: number) => C,
    count: number,
    private readonly rng: Rng,
    logFile: string,
    private readonly script: string = WORKER,
  ) {
    this.log = fs.createWriteStream(logFile, { flags: 'a' });
    for (let i = 0; i < count; i++) {
      this.slots.push({
        index: i,
        child: undefined,
        ready: false,
        armed: undefined,
        killedByParent: false,
        exited: undefined,
      });
    }
  }

  start(): void {
    for (const slot of this.slots) this.spawn(slot);
  }

  /** Slots whose worker reported ready and is still alive. */
  readySlots(): number[] {
    return this.slots.filter((s) => s.ready && s.child !== undefined).map((s) => s.index);
  }

  /** SIGKILLs the slot's worker; resolves with its exit. */
  async kill(index: number): Promise<WorkerExit | undefined> {
    const slot = this.slot(index);
    if (slot.child === undefined || slot.exited === undefined) return undefined;
    slot.killedByParent = true;
    slot.child.kill('SIGKILL');
    return slot.exited;
  }

  /**
   * Arms `point` in the slot's worker and waits up to `timeoutMs` for it to die there.
   * Resolves with the exit, or undefined if the point was not reached in time (disarmed).
   */
  async armAndWait(
    index: number,
    point: FaultPoint,
    timeoutMs: number,
  ): Promise<WorkerExit | undefined> {
    const slot = this.slot(index);
    if (slot.child === undefined || slot.exited === undefined) return undefined;
    slot.armed = point;
    this.send(slot, { type: 'arm', point });
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<undefined>(
      (resolve) => (timer = setTimeout(() => resolve(undefined), timeoutMs)),
    );
    const exit = await Promise.race([slot.exited, timeout]);
    clearTimeout(timer);
    return exit;
  }

  /** Stops every worker cleanly (SIGTERM, consumer.stop()), SIGKILL after `graceMs`. */
  async stop(graceMs = 20_000): Promise<void> {
    this.stopping = true;
    await Promise.all(
      this.slots.map(async (slot) => {
        if (slot.child === undefined || slot.exited === undefined) return;
        const exited = slot.exited;
        this.send(slot, { type: 'stop' });
        slot.child.kill('SIGTERM');
        const timer = setTimeout(() => slot.child?.kill('SIGKILL'), graceMs);
        await exited;
        clearTimeout(timer);
      }),
    );
    await new Promise<void>((resolve) => this.log.end(resolve));
  }

  private slot(index: number): Slot {
    const slot = this.slots[index];
    if (slot === undefined) throw new Error(`no worker slot ${index}`);
    return slot;
  }

  private send(slot: Slot, message: ToWorker): void {
    try {
      if (slot.child?.connected === true) slot.child.send(message);
    } catch {
      /* it is dying anyway */
    }
  }

  private spawn(slot: Slot): void {
    if (this.stopping) return;
    // fork inherits process.execArgv: tsx's loader, so the worker runs TypeScript too.
    const child = fork(this.script, [], {
      env: { ...process.env, [WORKER_ENV]: JSON.stringify(this.config(slot.index)) },
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    });
    this.spawned++;
    child.on('error', (error) =>
      this.log.write(`[fleet] worker ${slot.index}: ${error.message}\n`),
    );
    slot.child = child;
    slot.ready = false;
    slot.armed = undefined;
    slot.killedByParent = false;
    child.stdout?.pipe(this.log, { end: false });
    child.stderr?.pipe(this.log, { end: false });
    child.on('message', (message: FromWorker) => {
      if (message.type === 'ready') slot.ready = true;
      else if (message.type === 'events') {
        add(this.events.failed, message.failed);
        add(this.events.deadLettered, message.deadLettered);
      }
    });
    const pid = child.pid ?? -1;
    slot.exited = new Promise((resolve) => {
      child.once('exit', (code, signal) => {
        const exit: WorkerExit = {
          slot: slot.index,
          pid,
          code,
          signal,
          armed: signal === 'SIGKILL' ? slot.armed : undefined,
          killedByParent: slot.killedByParent,
        };
        this.exits.push(exit);
        this.log.write(
          `[fleet] worker ${slot.index} pid ${pid} exited code=${code} signal=${signal}${exit.armed ? ` at ${exit.armed}` : ''}\n`,
        );
        slot.child = undefined;
        slot.exited = undefined;
        slot.ready = false;
        resolve(exit);
        if (!this.stopping) setTimeout(() => this.spawn(slot), this.rng.int(100, 1000));
      });
    });
  }
}

function add(into: Map<string, number>, counts: Record<string, number>): void {
  for (const [code, n] of Object.entries(counts)) into.set(code, (into.get(code) ?? 0) + n);
}
