import { fileURLToPath } from 'node:url';
import { spawnPaymentServer, type PaymentProcess } from '../../test/helpers/http/spawn.js';
import type { Contender } from './contenders.js';

const ENTRY = fileURLToPath(new URL('./server.ts', import.meta.url));

/**
 * One payment server (server.ts) as a process manager runs it: a killed incarnation is
 * replaced on the same port. Counts the incarnations that died of SIGKILL.
 */
export class Supervised {
  kills = 0;
  private constructor(
    private readonly options: { contender: Contender; databaseUrl: string; schema: string },
    private process: PaymentProcess,
    readonly port: number,
  ) {}

  static async start(options: {
    contender: Contender;
    databaseUrl: string;
    schema: string;
  }): Promise<Supervised> {
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

function spawn(
  options: { contender: Contender; databaseUrl: string; schema: string },
  port: number,
): PaymentProcess {
  return spawnPaymentServer({
    framework: 'express',
    databaseUrl: options.databaseUrl,
    schema: options.schema,
    port,
    entry: ENTRY,
    env: { COMPARE_CONTENDER: options.contender },
  });
}
