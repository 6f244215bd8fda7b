import { fileURLToPath } from 'node:url';
import { spawnPaymentServer, type PaymentProcess } from '../../kit/payments/spawn.js';
import { track } from './children.js';

/** The payment server, the default child. */
const SERVER = fileURLToPath(new URL('./server.ts', import.meta.url));

/** Which child to run: server.ts (or `entry`, speaking its protocol), with `env`. */
export interface ChildOptions {
  databaseUrl: string;
  schema: string;
  /** Default: the payment server (server.ts). */
  entry?: string;
  env: Record<string, string>;
}

/**
 * One payment server (server.ts) or consumer worker (consumer/worker.ts) as a process
 * manager runs it: a killed incarnation is replaced (on the same port, for a server).
 * Counts the incarnations that died of SIGKILL.
 */
export class Supervised {
  kills = 0;
  private constructor(
    private readonly options: ChildOptions,
    private process: PaymentProcess,
    readonly port: number,
  ) {}

  static async start(options: ChildOptions): Promise<Supervised> {
    const process = spawn(options, 0);
    return new Supervised(options, process, await process.ready);
  }

  /**
   * After an attempt armed to kill the server: waits (up to 10 s) for it to die, then
   * starts the next incarnation on the same port. One that did not die is killed from
   * outside and not counted, so a crash point never reached shows in `kills`.
   */
  async restartAfterKill(): Promise<void> {
    let forced = false;
    const timer = setTimeout(() => {
      forced = true;
      void this.process.kill();
    }, 10_000);
    const how = await this.process.exited;
    clearTimeout(timer);
    if (how === 'SIGKILL' && !forced) this.kills++;
    this.process = spawn(this.options, this.port);
    await this.process.ready;
  }

  stop(): Promise<void> {
    return this.process.stop();
  }
}

function spawn(options: ChildOptions, port: number): PaymentProcess {
  return track(
    spawnPaymentServer({
      framework: 'express',
      databaseUrl: options.databaseUrl,
      schema: options.schema,
      port,
      entry: options.entry ?? SERVER,
      env: options.env,
    }),
  );
}
