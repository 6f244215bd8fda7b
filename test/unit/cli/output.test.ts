import { describe, expect, it } from '@jest/globals';
import { formatBytes, formatCount, formatFields, formatTable } from '../../../src/cli/output.js';

describe('CLI output', () => {
  it('formatBytes steps by 1024 from 10 units up, as pg_size_pretty does', () => {
    expect(formatBytes(0)).toBe('0 bytes');
    expect(formatBytes(10_239)).toBe('10239 bytes');
    expect(formatBytes(10_240)).toBe('10 kB');
    expect(formatBytes(8 * 1024 * 1024)).toBe('8192 kB');
    expect(formatBytes(1.3 * 1024 ** 3)).toBe('1331 MB');
    expect(formatBytes(12 * 1024 ** 3)).toBe('12 GB');
  });

  it('formatTable pads columns, right-aligns numbers and trims line ends', () => {
    expect(
      formatTable(
        [{ header: 'consumer' }, { header: 'rows', align: 'right' }, { header: 'note' }],
        [
          ['a', formatCount(10_000_000), ''],
          ['billing', '7', 'x'],
        ],
      ),
    ).toBe(
      ['consumer        rows  note', 'a         10,000,000', 'billing            7  x'].join('\n'),
    );
  });

  it('formatFields aligns values after their labels', () => {
    expect(
      formatFields([
        ['size', '1 GB'],
        ['older than 7d', '5'],
      ]),
    ).toBe(['size:           1 GB', 'older than 7d:  5'].join('\n'));
  });
});
