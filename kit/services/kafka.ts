import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { jvmFlags, startJava } from './java.js';
import { javaBin, resolveClasspath } from './maven.js';
import { HOST } from './ports.js';
import { run } from './process.js';
import type { KafkaState } from './state.js';

/**
 * Single-node KRaft (broker + controller in one JVM). Internal topics have
 * one replica and one partition: there is one broker, and a 50-partition
 * __consumer_offsets makes the first consumer group join slow.
 * group.min.session.timeout.ms is lowered so rebalance tests can use short
 * session timeouts. The broker session is short because after a crash
 * (SIGKILL) the restarted broker cannot register until the dead
 * incarnation's session expires: 9 s by default, 2 s here.
 */
function serverProperties(port: number, controllerPort: number, dataDir: string): string {
  return `
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@${HOST}:${controllerPort}
listeners=PLAINTEXT://${HOST}:${port},CONTROLLER://${HOST}:${controllerPort}
advertised.listeners=PLAINTEXT://${HOST}:${port}
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=${dataDir}
num.partitions=1
default.replication.factor=1
auto.create.topics.enable=true
offsets.topic.replication.factor=1
offsets.topic.num.partitions=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=1
group.initial.rebalance.delay.ms=0
group.min.session.timeout.ms=1000
broker.heartbeat.interval.ms=500
broker.session.timeout.ms=2000
num.network.threads=2
num.io.threads=2
`;
}

/** Broker log to stdout (which is our log file); INFO so startup failures are explained. */
const LOG4J = `
log4j.rootLogger=INFO, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.server.KafkaConfig=WARN
log4j.logger.org.apache.kafka.common.config=WARN
`;

/** The same logging for Kafka 4.x, which reads log4j2 configuration (log4j 1 is gone). */
const LOG4J2 = `
appender.stdout.type=Console
appender.stdout.name=STDOUT
appender.stdout.layout.type=PatternLayout
appender.stdout.layout.pattern=[%d] %p %m (%c)%n
rootLogger.level=INFO
rootLogger.appenderRef.stdout.ref=STDOUT
logger.config.name=kafka.server.KafkaConfig
logger.config.level=WARN
logger.common.name=org.apache.kafka.common.config
logger.common.level=WARN
`;

/**
 * Broker lines we test against, chosen with EO_KAFKA_VERSION (a major
 * version; 3 by default). Each has its own dependency list under
 * kit/services/deps/ and its own logging setup: Kafka 4 removed log4j 1.
 */
export const KAFKA_VERSIONS = {
  '3': {
    version: '3.9.1',
    pom: 'kafka',
    loggingFile: 'log4j.properties',
    logging: LOG4J,
    loggingFlag: (file: string) => `-Dlog4j.configuration=file:${file}`,
  },
  '4': {
    version: '4.4.0',
    pom: 'kafka4',
    loggingFile: 'log4j2.properties',
    logging: LOG4J2,
    loggingFlag: (file: string) => `-Dlog4j2.configurationFile=${file}`,
  },
} as const;
export type KafkaMajor = keyof typeof KAFKA_VERSIONS;

/** The broker line EO_KAFKA_VERSION selects; a clear error for anything else. */
export function kafkaMajor(): KafkaMajor {
  const wanted = process.env['EO_KAFKA_VERSION'] ?? '3';
  if (wanted in KAFKA_VERSIONS) return wanted as KafkaMajor;
  throw new Error(
    `EO_KAFKA_VERSION=${wanted}: expected one of ${Object.keys(KAFKA_VERSIONS).join(', ')}`,
  );
}

/**
 * A KRaft cluster id: 16 random bytes, base64url, as `kafka-storage random-uuid`
 * prints. Re-rolled when it starts with '-', which the CLI would read as a flag.
 */
function clusterId(): string {
  for (;;) {
    const id = randomBytes(16).toString('base64url');
    if (!id.startsWith('-')) return id;
  }
}

/**
 * Ready when a kafkajs admin (what the adapter uses) can list topics and find
 * a group coordinator. The latter makes the broker create __consumer_offsets
 * now, during setup, instead of stalling the first consumer group of a test.
 */
export async function kafkaReady(brokers: string): Promise<boolean> {
  const { Kafka, logLevel } = await import('kafkajs');
  const admin = new Kafka({
    clientId: 'eo-services-probe',
    brokers: brokers.split(','),
    logLevel: logLevel.NOTHING,
    connectionTimeout: 1000,
    retry: { retries: 0 },
  }).admin();
  try {
    await admin.connect();
    await admin.listTopics();
    await admin.describeGroups(['eo-services-probe']);
    return true;
  } finally {
    await admin.disconnect();
  }
}

export async function createKafka(
  root: string,
  port: number,
  controllerPort: number,
): Promise<KafkaState> {
  const home = path.join(root, 'kafka');
  const dataDir = path.join(home, 'data');
  fs.mkdirSync(home, { recursive: true });
  const flavour = KAFKA_VERSIONS[kafkaMajor()];
  const configFile = path.join(home, 'server.properties');
  const loggingFile = path.join(home, flavour.loggingFile);
  fs.writeFileSync(configFile, serverProperties(port, controllerPort, dataDir));
  fs.writeFileSync(loggingFile, flavour.logging);
  const classpath = await resolveClasspath(flavour.pom);
  const java = javaBin();
  const common = [...jvmFlags('512m'), flavour.loggingFlag(loggingFile), '-cp', classpath];
  const logFile = path.join(home, 'kafka.log');

  // KRaft needs its log dir formatted with a cluster id before the first start.
  await run(java, [
    ...common,
    'kafka.tools.StorageTool',
    'format',
    '-t',
    clusterId(),
    '-c',
    configFile,
  ]);

  const brokers = `${HOST}:${port}`;
  const state: KafkaState = {
    pid: 0,
    command: java,
    args: [...common, 'kafka.Kafka', configFile],
    logFile,
    port,
    controllerPort,
    brokers,
    dataDir,
  };
  state.pid = await startJava(state, `Kafka ${flavour.version} on ${brokers}`, () =>
    kafkaReady(brokers),
  );
  return state;
}
