import fs from 'node:fs';
import path from 'node:path';
import { canConnect, freePorts, HOST } from './ports.js';
import { isAlive, killProcess, run, spawnDetached, waitUntil } from './process.js';
import { currentState, type RabbitMqState } from './state.js';

/**
 * The RabbitMQ start script: EO_RABBITMQ_SERVER, else Debian's. Not /usr/sbin/rabbitmq-server:
 * that wrapper switches to the `rabbitmq` user and to the system node's directories;
 * /usr/lib/rabbitmq/bin/rabbitmq-server takes every path from the environment.
 * `bash .ci/run` installs Debian's `rabbitmq-server` package when it is missing.
 */
export function findRabbitMqServer(): string {
  const fromEnv = process.env['EO_RABBITMQ_SERVER'];
  const candidates = fromEnv ? [fromEnv] : ['/usr/lib/rabbitmq/bin/rabbitmq-server'];
  const found = candidates.find((file) => fs.existsSync(file));
  if (found) return found;
  throw new Error(
    `No RabbitMQ server script (${candidates.join(', ')}): install rabbitmq-server or set EO_RABBITMQ_SERVER`,
  );
}

/**
 * A private node: its own name (unique per run, so it never meets the system node or
 * another run's in epmd), loopback listener, data, logs, Erlang cookie (HOME) and no
 * plugins (the management plugin alone adds seconds to a start). The default user
 * `guest` may connect from loopback, which is the only place the listener is.
 */
function environment(state: RabbitMqState): NodeJS.ProcessEnv {
  const home = state.home;
  return {
    ...process.env,
    HOME: home,
    RABBITMQ_NODENAME: state.nodeName,
    RABBITMQ_USE_LONGNAME: 'false',
    RABBITMQ_NODE_IP_ADDRESS: HOST,
    RABBITMQ_NODE_PORT: String(state.port),
    RABBITMQ_DIST_PORT: String(state.distPort),
    RABBITMQ_MNESIA_BASE: path.join(home, 'mnesia'),
    RABBITMQ_LOG_BASE: path.join(home, 'log'),
    RABBITMQ_CONFIG_FILE: path.join(home, 'rabbitmq.conf'),
    RABBITMQ_ADVANCED_CONFIG_FILE: path.join(home, 'advanced.config'),
    RABBITMQ_ENABLED_PLUGINS_FILE: path.join(home, 'enabled_plugins'),
    RABBITMQ_PID_FILE: path.join(home, 'rabbitmq.pid'),
  };
}

/** An AMQP connection that opens and closes: the node booted and accepts clients. */
export async function rabbitMqReady(url: string): Promise<boolean> {
  const amqp = await import('amqplib');
  const connection = await amqp.connect(url);
  await connection.close();
  return true;
}

/** Writes the node's files under `<root>/rabbitmq` and starts it. */
export async function createRabbitMq(
  root: string,
  port: number,
  distPort: number,
): Promise<RabbitMqState> {
  const home = path.join(root, 'rabbitmq');
  for (const dir of ['mnesia', 'log']) fs.mkdirSync(path.join(home, dir), { recursive: true });
  fs.writeFileSync(path.join(home, 'enabled_plugins'), '[].\n');
  fs.writeFileSync(path.join(home, 'advanced.config'), '[].\n');
  // Disk and memory alarms would block publishers on a busy CI machine's small disk.
  fs.writeFileSync(
    path.join(home, 'rabbitmq.conf'),
    [
      'loopback_users = none',
      'disk_free_limit.absolute = 1MB',
      'vm_memory_high_watermark.relative = 0.8',
      '',
    ].join('\n'),
  );
  const state: RabbitMqState = {
    pid: 0,
    command: findRabbitMqServer(),
    home,
    nodeName: `eo-${port}@localhost`,
    port,
    distPort,
    url: `amqp://guest:guest@${HOST}:${port}`,
    logFile: path.join(home, 'rabbitmq.out'),
  };
  await rabbitMqStart(state);
  return state;
}

/** Starts the node (again: same name, same data) and waits until a client connects. */
export async function rabbitMqStart(
  state: RabbitMqState,
  onSpawn: (pid: number) => void = () => {},
): Promise<void> {
  if (state.pid > 0 && isAlive(state.pid))
    throw new Error(`RabbitMQ is already running (pid ${state.pid})`);
  if (await canConnect(state.port))
    throw new Error(`RabbitMQ: port ${state.port} is already in use`);
  state.pid = spawnDetached(state.command, [], state.logFile, {
    env: environment(state),
    cwd: state.home,
  });
  onSpawn(state.pid);
  await waitUntil(() => rabbitMqReady(state.url), {
    what: `RabbitMQ on port ${state.port} did not become ready`,
    // An Erlang node boots in about 10 s on an idle machine; a busy CI box takes far longer.
    timeoutMs: 180_000,
    logFile: state.logFile,
    pid: state.pid,
  }).catch(async (error: unknown) => {
    await killProcess(state.pid, 'SIGKILL');
    throw error;
  });
}

/** SIGTERM: the node stops cleanly (clients see their connections closed); SIGKILL: a crash. */
export async function rabbitMqStop(
  state: RabbitMqState,
  signal: 'SIGTERM' | 'SIGKILL' = 'SIGTERM',
): Promise<void> {
  await killProcess(state.pid, signal, 30_000);
  await waitUntil(async () => !(await canConnect(state.port)), {
    what: `port ${state.port} still open after stopping pid ${state.pid}`,
    timeoutMs: 15_000,
    intervalMs: 50,
  });
}

/**
 * Runs `rabbitmqctl` against the node (its name, and its HOME for the Erlang cookie),
 * e.g. `close_all_connections <reason>`: the broker drops its clients' connections.
 */
export async function rabbitMqCtl(state: RabbitMqState, args: readonly string[]): Promise<string> {
  const ctl = path.join(path.dirname(state.command), 'rabbitmqctl');
  return run(ctl, ['-n', state.nodeName, ...args], { env: environment(state), cwd: state.home });
}

/** A node of a test's own, for tests that restart the broker or drop every connection. */
export interface PrivateRabbitMq {
  readonly url: string;
  stop(signal?: 'SIGTERM' | 'SIGKILL'): Promise<void>;
  start(): Promise<void>;
  /** The node closes every client connection. */
  closeConnections(reason?: string): Promise<void>;
  /** Crash-stops the node and removes its files. */
  dispose(): Promise<void>;
}

/**
 * Starts a node under `<the run's services dir>/<name>` (so teardown's sweep finds it if
 * the test dies): restarting the shared node would break every other test file using it.
 */
export async function startPrivateRabbitMq(name: string): Promise<PrivateRabbitMq> {
  const services = currentState();
  if (services === undefined) throw new Error('no test services run (EO_SERVICES_STATE unset)');
  const root = path.join(services.root, name);
  const [port, distPort] = (await freePorts(2)) as [number, number];
  const state = await createRabbitMq(root, port, distPort);
  return {
    url: state.url,
    stop: (signal) => rabbitMqStop(state, signal),
    start: () => rabbitMqStart(state),
    closeConnections: async (reason = 'closed by a test') => {
      await rabbitMqCtl(state, ['close_all_connections', reason]);
    },
    dispose: async () => {
      await rabbitMqStop(state, 'SIGKILL').catch(() => undefined);
      fs.rmSync(root, { recursive: true, force: true });
    },
  };
}
