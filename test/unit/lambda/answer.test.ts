import { describe, expect, it } from '@jest/globals';
import { batchItemFailures, type RecordEnd } from '../../../adapters/lambda/answer.js';

const end = (messageId: string, finished: boolean, group?: string): RecordEnd => ({
  messageId,
  group,
  finished,
  outcome: finished ? 'processed' : 'retry',
});

describe('batchItemFailures', () => {
  it('lists only the records not finished on a standard queue', () => {
    expect(batchItemFailures([end('a', true), end('b', false), end('c', true)])).toEqual([
      { itemIdentifier: 'b' },
    ]);
  });

  it('answers an all-finished batch with an empty list (Lambda deletes every record)', () => {
    expect(batchItemFailures([end('a', true), end('b', true)])).toEqual([]);
  });

  it('FIFO: fails a group from its first failure on, even a later record that finished', () => {
    const ends = [
      end('g1-1', true, 'g1'),
      end('g2-1', true, 'g2'),
      end('g1-2', false, 'g1'),
      end('g2-2', true, 'g2'),
      end('g1-3', true, 'g1'),
      end('g1-4', false, 'g1'),
    ];
    expect(batchItemFailures(ends).map((f) => f.itemIdentifier)).toEqual(['g1-2', 'g1-3', 'g1-4']);
  });
});
