/**
 * Issue 32, defect 4: `stop({ timeoutMs })` resolves by its deadline whatever the client
 * is doing. A group whose member was SIGKILLed keeps a new member joining until the dead
 * one's session expires; kafkajs's `run()` (and its disconnect) wait for that join, and
 * `stop({ timeoutMs: 1000 })` used to wait with them (34.5 s with a 30 s session).
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from '@jest/globals';
import type { Kafka } from 'kafkajs';
import type { TestDatabase } from '../../helpers/db.js';
import { waitFor } from '../../helpers/wait-for.js';
import {
  committedOffsets,
  createTopics,
  kafkaTestEnv,
  produce,
  startConsumer,
  unique,
} from './kafka-helpers.js';

let db: TestDatabase;
let kafka: Kafka;
kafkaTestEnv('kafka_stop_join', (env) => ({ db, kafka } = env));

/** The dead member's session: the new member's join lasts about this long. */
const DEAD_SESSION_MS = 30_000;

async function groupState(groupId: string): Promise<string | undefined> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    const { groups } = await admin.describeGroups([groupId]);
    return groups[0]?.state;
  } finally {
    await admin.disconnect();
  }
}

describe('Kafka: stop while the member is still joining a group with a crashed member', () => {
  it('resolves by its deadline and takes nothing after it', async () => {
    const topic = unique('stop-join');
    const groupId = unique('g-stop-join');
    await createTopics(kafka, [{ topic, partitions: 2 }]);
    await produce(
      kafka,
      topic,
      Array.from({ length: 10 }, (_, seq) => ({
        partition: seq % 2,
        value: JSON.stringify({ seq }),
      })),
    );

    const child = spawn(
      process.execPath,
      ['--import', 'tsx', fileURLToPath(new URL('./member-child.ts', import.meta.url))],
      {
        env: {
          ...process.env,
          EO_GROUP: groupId,
          EO_TOPIC: topic,
          EO_SESSION_MS: String(DEAD_SESSION_MS),
        },
        stdio: ['ignore', 'pipe', 'inherit'],
      },
    );
    const exited = new Promise<NodeJS.Signals | number | null>((resolve) =>
      child.on('exit', (code, signal) => resolve(signal ?? code)),
    );
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    try {
      await waitFor(() => out.includes('"joined"'), {
        timeoutMs: 60_000,
        what: 'the child joined',
      });
    } finally {
      child.kill('SIGKILL');
    }
    expect(await exited).toBe('SIGKILL');

    // kafkajs, whatever EO_KAFKA_CLIENT says: the hang was its run() awaiting the join.
    // @platformatic/kafka joins from a stream the stop signal already ends (issue 32: it
    // stopped in 1 ms), and its JoinGroup does not keep this group in PreparingRebalance.
    const running = await startConsumer({
      db,
      kafka,
      groupId,
      topics: [topic],
      member: 'b',
      client: 'kafkajs',
    });
    try {
      // The new member's JoinGroup keeps the group rebalancing until the dead one's session ends.
      await waitFor(async () => (await groupState(groupId)) === 'PreparingRebalance', {
        timeoutMs: 20_000,
        what: 'the group rebalancing for the new member',
      });
      expect(running.source.partitions()).toEqual([]);
      const started = performance.now();
      await running.consumer.stop({ timeoutMs: 1000 });
      const tookMs = performance.now() - started;
      // A generous margin over the deadline for a loaded machine, far below the dead session.
      expect(tookMs).toBeLessThan(1000 + 5000);
    } finally {
      await running.stop();
    }
    // The client's leave goes on in the background; once the group has settled, the
    // stopped member handled and committed nothing.
    await waitFor(async () => ['Empty', 'Dead'].includes((await groupState(groupId)) ?? ''), {
      timeoutMs: DEAD_SESSION_MS + 60_000,
      what: 'the group empty',
    });
    expect(running.calls).toEqual([]);
    const committed = await committedOffsets(kafka, groupId, topic);
    expect([...committed.values()].filter((offset) => offset >= 0)).toEqual([]);
  }, 180_000);
});
