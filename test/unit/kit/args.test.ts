import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { describe, expect, it } from '@jest/globals';
import {
  choiceOption,
  intOption,
  listOption,
  numberOption,
  UsageError,
} from '../../../kit/args.js';

describe('kit/args: the one argument checker of chaos, bench and compare', () => {
  it('takes integers and numbers in range, the fallback when absent', () => {
    expect(intOption('kills', '3', 5, 0, 10)).toBe(3);
    expect(intOption('kills', undefined, 5, 0, 10)).toBe(5);
    expect(numberOption('drop', '0.25', 0.1, 0, 1)).toBe(0.25);
    expect(() => intOption('kills', '1.5', 5, 0, 10)).toThrow(
      new UsageError('--kills must be an integer from 0 to 10'),
    );
    expect(() => intOption('kills', '11', 5, 0, 10)).toThrow(UsageError);
    expect(() => numberOption('drop', 'x', 0.1, 0, 1)).toThrow(
      new UsageError('--drop must be a number from 0 to 1'),
    );
  });

  it('takes one of a set, and lists of a set (all when absent or `all`)', () => {
    expect(choiceOption('broker', 'kafka', ['sqs', 'kafka'], 'sqs')).toBe('kafka');
    expect(choiceOption('broker', undefined, ['sqs', 'kafka'], 'sqs')).toBe('sqs');
    expect(() => choiceOption('broker', 'nats', ['sqs', 'kafka'], 'sqs')).toThrow(
      new UsageError('--broker must be one of sqs, kafka'),
    );
    expect(listOption('kinds', 'b, a', ['a', 'b', 'c'])).toEqual(['b', 'a']);
    expect(listOption('kinds', 'all', ['a', 'b'])).toEqual(['a', 'b']);
    expect(listOption('kinds', undefined, ['a', 'b'])).toEqual(['a', 'b']);
    expect(() => listOption('kinds', 'a,z', ['a', 'b'])).toThrow(UsageError);
    expect(() => listOption('kinds', ',', ['a', 'b'])).toThrow(UsageError);
  });
});

describe('chaos/main.ts: one target table', () => {
  const run = async (
    ...args: string[]
  ): Promise<{ code: number; stdout: string; stderr: string }> => {
    try {
      const { stdout, stderr } = await promisify(execFile)(
        process.execPath,
        ['--import', 'tsx', 'chaos/main.ts', ...args],
        { env: { ...process.env, NODE_NO_WARNINGS: '1' } },
      );
      return { code: 0, stdout, stderr };
    } catch (error) {
      const e = error as { code: number; stdout: string; stderr: string };
      return { code: e.code, stdout: e.stdout, stderr: e.stderr };
    }
  };

  it('refuses an unknown target with the list of targets, exit 64', async () => {
    const { code, stderr } = await run('--target', 'nope');
    expect(code).toBe(64);
    expect(stderr).toContain('chaos: --target must be one of consumer, http, steps, outbox');
  }, 30_000);

  it("prints each target's own usage on --help, exit 0", async () => {
    const outbox = await run('--target=outbox', '--help');
    expect(outbox.code).toBe(0);
    expect(outbox.stderr).toContain('usage: tsx chaos/main.ts --target outbox');
    const consumer = await run('--target', 'consumer', '--help');
    expect(consumer.code).toBe(0);
    expect(consumer.stderr).toContain('--broker sqs|kafka');
  }, 30_000);

  it("hands the consumer target's options to its parser without --target", async () => {
    const { code, stderr } = await run('--target', 'consumer', '--broker', 'nats');
    expect(code).toBe(64);
    expect(stderr).toContain('chaos: --broker must be sqs, kafka or rabbitmq');
  }, 30_000);
});
