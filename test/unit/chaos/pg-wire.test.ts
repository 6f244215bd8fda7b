/**
 * The failover proxy's reading of the wire protocol (chaos/failover/pg-wire.ts): message
 * framing across any chunking, and the claim's COMMIT recognised in the SQL the library
 * really sends (so a change to commitClaimSql cannot silently blind the harness).
 */
import { describe, expect, it } from '@jest/globals';
import { FrameReader, claimCommitXid, queryText } from '../../../kit/services/cluster/pg-wire.js';
import { commitClaimSql } from '../../../src/store/commit.js';

function startup(): Buffer {
  const params = Buffer.from('user\0postgres\0database\0db\0\0');
  const head = Buffer.alloc(8);
  head.writeInt32BE(8 + params.length, 0);
  head.writeInt32BE(196_608, 4);
  return Buffer.concat([head, params]);
}

function message(type: string, body: Buffer): Buffer {
  const head = Buffer.alloc(5);
  head.write(type, 0);
  head.writeInt32BE(body.length + 4, 1);
  return Buffer.concat([head, body]);
}

const query = (sql: string): Buffer => message('Q', Buffer.from(`${sql}\0`));

describe('FrameReader', () => {
  const stream = Buffer.concat([
    startup(),
    query('SELECT 1'),
    message('S', Buffer.alloc(0)),
    query(commitClaimSql('4242')),
  ]);

  it.each([1, 2, 3, 7, 64, stream.length])('splits a stream fed %i bytes at a time', (size) => {
    const reader = new FrameReader(true, (t) => t === 'Q');
    const frames = [];
    for (let at = 0; at < stream.length; at += size)
      frames.push(...reader.push(stream.subarray(at, at + size)));
    expect(frames.map((f) => f.type)).toEqual(['', 'Q', 'S', 'Q']);
    expect(frames.map((f) => f.body && claimCommitXid(queryText(f.body)))).toEqual([
      undefined,
      undefined,
      undefined,
      '4242',
    ]);
    expect(reader.opaque).toBe(false);
  });

  it('reads nothing of a connection that starts with an SSL request', () => {
    const ssl = Buffer.alloc(8);
    ssl.writeInt32BE(8, 0);
    ssl.writeInt32BE(80_877_103, 4);
    const reader = new FrameReader(true, () => true);
    expect(reader.push(Buffer.concat([ssl, query('SELECT 1')]))).toEqual([]);
    expect(reader.opaque).toBe(true);
  });
});

describe('claimCommitXid', () => {
  it('finds the xid in the COMMIT round trip, with or without a last statement', () => {
    expect(claimCommitXid(commitClaimSql('17'))).toBe('17');
    expect(claimCommitXid(commitClaimSql('18', 'INSERT INTO t VALUES (1)'))).toBe('18');
  });

  it('ignores other queries, a bare COMMIT included', () => {
    expect(claimCommitXid('COMMIT')).toBeUndefined();
    expect(claimCommitXid('SELECT 1')).toBeUndefined();
  });
});
