/**
 * A connection that lands on a node that cannot take writes: a hot standby (the proxy
 * in front points at it before it is promoted, as DNS or a pooler may during a
 * failover), or a server whose sessions start read-only (`default_transaction_read_only`
 * set for the role, as on a demoted primary behind a pooler). The claim's INSERT gets
 * SQLSTATE 25006. That is an outage, not the message's fault: no attempt is spent
 * (maxAttempts is 1 here, so a spent attempt would dead-letter it), deliveries pause
 * while the node stays read-only, and once it takes writes the message is applied once.
 * Both read-only nodes must behave alike.
 */
import { afterAll, describe, expect, it } from '@jest/globals';
import { migrate, type Consumer, type ConsumerEvents } from '../../../src/index.js';
import { sqlstateOf } from '../../../src/store/pg-errors.js';
import { memoryHarness } from '../../helpers/memory-harness.js';
import { sleep, waitFor } from '../../helpers/wait-for.js';
import { readOnlyNodes as nodes, type ReadOnlyNode } from './read-only-nodes.js';
import { recordingLogger } from './support.js';

describe('a read-only node (SQLSTATE 25006)', () => {
  const opened: ReadOnlyNode[] = [];
  const consumers: Consumer[] = [];
  afterAll(async () => {
    for (const consumer of consumers) await consumer.stop({ timeoutMs: 1000 });
    for (const node of opened) await node.close();
  });

  it.each(Object.keys(nodes))(
    '%s: no attempt spent, deliveries pause, applied once when it takes writes',
    async (name) => {
      const node = await nodes[name]!();
      opened.push(node);
      await migrate(node.db.pool, { schema: node.db.schema });
      const logger = recordingLogger();
      const h = await memoryHarness(node.db, { maxAttempts: 1, migrate: false, logger });
      consumers.push(h.consumer);
      const failures: Array<ConsumerEvents['failed']> = [];
      h.consumer.on('failed', (e) => failures.push(e));
      await node.makeReadOnly();
      const message = h.source.send({ id: 'ro', amount: 1 }, { key: 'ro' });
      await h.consumer.start();

      const paused = await waitFor(
        () => logger.lines.find((l) => l.msg.includes('pausing deliveries')),
        { what: 'the consumer pausing', timeoutMs: 10_000 },
      );
      expect(paused.code).toBe('25006');
      // Paused: the probe finds the node still read-only, so no delivery starts.
      const attempts = message.attempts;
      await sleep(1500);
      expect(message.attempts).toBe(attempts);
      expect(message.state).not.toBe('dead-lettered');

      await node.makeWritable();
      await waitFor(() => message.state === 'acked', { what: 'acked', timeoutMs: 30_000 });
      await h.consumer.stop();
      expect(message.outcomes.at(-1)).toBe('processed');
      expect(new Set(message.outcomes.slice(0, -1))).toEqual(new Set(['retry']));
      expect(failures.length).toBeGreaterThan(0);
      for (const f of failures) {
        expect(f.willRetry).toBe(true);
        expect(f.error.code).toBe('EO_DATABASE');
        expect(sqlstateOf(f.error.cause)).toBe('25006');
      }
      expect(logger.said('reachable again, resuming')).toBe(true);
      expect(await h.effects()).toEqual([{ id: 'ro', amount: 1 }]);
    },
    90_000,
  );
});
