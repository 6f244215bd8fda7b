/** Issue 32: SQS's `SentTimestamp`, which the admission floor reads as the first send. */
import { describe, expect, it } from '@jest/globals';
import { sentTimestampOf } from '../../../adapters/sqs/delivery.js';

describe('sentTimestampOf', () => {
  it('reads the SentTimestamp system attribute (ms since the epoch)', () => {
    expect(sentTimestampOf({ Attributes: { SentTimestamp: '1700000000000' } })).toEqual(
      new Date(1_700_000_000_000),
    );
  });

  it('is undefined when the receive did not ask for it, or it is not a time', () => {
    expect(sentTimestampOf({})).toBeUndefined();
    expect(sentTimestampOf({ Attributes: { SentTimestamp: 'x' } })).toBeUndefined();
    expect(sentTimestampOf({ Attributes: { SentTimestamp: '0' } })).toBeUndefined();
  });
});
