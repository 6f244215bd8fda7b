/**
 * A bare kafkajs group member in its own process, for the tests that SIGKILL one: joins
 * EO_GROUP on EO_TOPIC with a session and rebalance timeout of EO_SESSION_MS, prints
 * `{"t":"joined"}` once it has its assignment, and consumes nothing (it is killed).
 */
import { Kafka, logLevel } from 'kafkajs';
import { kafkaBrokers } from '../../helpers/env.js';

const sessionMs = Number(process.env['EO_SESSION_MS']);
const kafka = new Kafka({
  clientId: 'eo-member-child',
  brokers: kafkaBrokers(),
  logLevel: logLevel.NOTHING,
});
const consumer = kafka.consumer({
  groupId: process.env['EO_GROUP']!,
  sessionTimeout: sessionMs,
  rebalanceTimeout: sessionMs,
  heartbeatInterval: 300,
  maxWaitTimeInMs: 100,
});
consumer.on(consumer.events.GROUP_JOIN, () => process.stdout.write('{"t":"joined"}\n'));
await consumer.connect();
await consumer.subscribe({ topics: [process.env['EO_TOPIC']!], fromBeginning: true });
// Holds every batch: the records stay for the member that comes after this one dies.
await consumer.run({ eachBatch: () => new Promise<void>(() => undefined), autoCommit: false });
