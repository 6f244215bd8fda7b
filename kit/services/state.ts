import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { RunAs } from './process.js';

/**
 * The state file is how processes other than global setup find the services:
 * jest workers (chaos tests restart Postgres or the broker), global teardown,
 * and the next run's reaper when a run died without tearing down.
 * Its path travels in EO_SERVICES_STATE, which workers inherit.
 */
export const STATE_ENV = 'EO_SERVICES_STATE';

/**
 * All runs live under one directory so a later run can find and reap dead
 * ones. EO_SERVICES_DIR moves it (CI uses a private one to check for leaks).
 */
export const RUNS_DIR =
  process.env['EO_SERVICES_DIR'] ?? path.join(os.tmpdir(), 'effectively-once-services');

export interface PostgresState {
  bindir: string;
  dataDir: string;
  port: number;
  url: string;
  logFile: string;
  /** Set when we are root: Postgres refuses to run as root. */
  runAs?: RunAs | undefined;
}

/** PgBouncer in front of the test Postgres (EO_SERVICES=…,pgbouncer or EO_VIA_PGBOUNCER=1). */
export interface PgBouncerState {
  binary: string;
  pid: number;
  port: number;
  iniFile: string;
  logFile: string;
  /** Where tests connect: PgBouncer's address, the server's user and database. */
  url: string;
  /** The Postgres it pools connections to. */
  serverUrl: string;
  /** Set when we are root: PgBouncer refuses to run as root. */
  runAs?: RunAs | undefined;
}

/** A JVM service, recorded with its full command line so any process can start it again. */
export interface JavaServiceState {
  pid: number;
  command: string;
  args: string[];
  logFile: string;
  port: number;
}

export interface KafkaState extends JavaServiceState {
  brokers: string;
  controllerPort: number;
  dataDir: string;
}

/** A private RabbitMQ node (EO_SERVICES=…,rabbitmq), recorded so any process can restart it. */
export interface RabbitMqState {
  pid: number;
  /** The start script (Debian's /usr/lib/rabbitmq/bin/rabbitmq-server). */
  command: string;
  /** Its HOME: config, data (mnesia), logs and Erlang cookie. */
  home: string;
  nodeName: string;
  port: number;
  /** Erlang distribution port (the CLI tools reach the node there). */
  distPort: number;
  /** `amqp://guest:guest@127.0.0.1:<port>`. */
  url: string;
  logFile: string;
}

export interface ServicesState {
  provider: 'native' | 'testcontainers';
  /** The jest process that owns these services; when it is dead they are stale. */
  ownerPid: number;
  /** Temp directory with data dirs, configs and logs; removed at teardown. */
  root: string;
  postgres?: PostgresState;
  elasticmq?: JavaServiceState;
  /** LocalStack instead of ElasticMQ (EO_SQS_EMULATOR=localstack): a Python process, recorded the same way. */
  localstack?: JavaServiceState;
  kafka?: KafkaState;
  pgbouncer?: PgBouncerState;
  rabbitmq?: RabbitMqState;
}

export function stateFile(root: string): string {
  return path.join(root, 'state.json');
}

/** Atomic write (temp + rename): a reader never sees half a file. */
export function writeState(state: ServicesState): void {
  const file = stateFile(state.root);
  const tmp = `${file}.${process.pid}.tmp`;
  fs.writeFileSync(tmp, JSON.stringify(state, null, 2));
  fs.renameSync(tmp, file);
}

export function readStateFile(file: string): ServicesState {
  return JSON.parse(fs.readFileSync(file, 'utf8')) as ServicesState;
}

/** The current run's state, or undefined when global setup started nothing (all endpoints given). */
export function currentState(): ServicesState | undefined {
  const file = process.env[STATE_ENV];
  return file && fs.existsSync(file) ? readStateFile(file) : undefined;
}

/**
 * Read-modify-write of the current state. Not locked: the only writers after
 * setup are chaos helpers restarting one service, one at a time.
 */
export function updateState(change: (state: ServicesState) => void): void {
  const state = currentState();
  if (!state) throw new Error(`${STATE_ENV} is not set or its file is gone`);
  change(state);
  writeState(state);
}
