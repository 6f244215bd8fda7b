import { describe, expect, it } from '@jest/globals';
import { LazyLinkedSignal } from '../../../src/signals.js';
import pg from 'pg';
import { arrayLiteral, sqlLiteral } from '../../../src/store/literals.js';

describe('LazyLinkedSignal', () => {
  it('touches no parent until the signal is read', () => {
    const parent = new AbortController();
    let added = 0;
    const original = parent.signal.addEventListener.bind(parent.signal);
    parent.signal.addEventListener = (...args: Parameters<typeof original>) => {
      added++;
      original(...args);
    };
    const link = new LazyLinkedSignal([parent.signal]);
    link.dispose();
    expect(added).toBe(0);
  });

  it('aborts with the parent’s reason, before or after it is read', () => {
    const early = new AbortController();
    early.abort('early');
    expect(new LazyLinkedSignal([early.signal]).signal.reason).toBe('early');

    const late = new AbortController();
    const link = new LazyLinkedSignal([undefined, late.signal]);
    const signal = link.signal;
    expect(signal.aborted).toBe(false);
    late.abort('late');
    expect(signal.aborted).toBe(true);
    expect(signal.reason).toBe('late');
  });

  it('its own abort applies now or when first read', () => {
    const read = new LazyLinkedSignal([]);
    const signal = read.signal;
    read.abort('timeout');
    expect(signal.reason).toBe('timeout');

    const unread = new LazyLinkedSignal([new AbortController().signal]);
    unread.abort('timeout');
    expect(unread.signal.aborted).toBe(true);
    expect(unread.signal.reason).toBe('timeout');
  });

  it('dispose removes its listeners; a read after dispose links nothing', () => {
    const parent = new AbortController();
    let active = 0;
    const add = parent.signal.addEventListener.bind(parent.signal);
    const remove = parent.signal.removeEventListener.bind(parent.signal);
    parent.signal.addEventListener = (...a: Parameters<typeof add>) => {
      active++;
      add(...a);
    };
    parent.signal.removeEventListener = (...a: Parameters<typeof remove>) => {
      active--;
      remove(...a);
    };
    const link = new LazyLinkedSignal([parent.signal]);
    void link.signal;
    expect(active).toBe(1);
    link.dispose();
    expect(active).toBe(0);

    const late = new LazyLinkedSignal([parent.signal]);
    late.dispose();
    const signal = late.signal;
    expect(active).toBe(0);
    parent.abort();
    expect(signal.aborted).toBe(false);
  });
});

describe('arrayLiteral', () => {
  it('quotes every element and escapes backslashes and double quotes; null is NULL', () => {
    expect(arrayLiteral([])).toBe('{}');
    expect(arrayLiteral(['a', null, 'NULL'])).toBe('{"a",NULL,"NULL"}');
    expect(arrayLiteral(['say "hi"', 'c:\\dir', '{a,b}'])).toBe(
      '{"say \\"hi\\"","c:\\\\dir","{a,b}"}',
    );
  });
});

describe('sqlLiteral', () => {
  it('matches pg escapeLiteral on quotes, backslashes, unicode and SQL', () => {
    const samples = [
      '',
      'plain',
      "it's",
      'back\\slash',
      "\\'; DROP TABLE x; --",
      "''",
      'ünïcødé 🔑',
      '\\x00ff',
      "E'\\",
    ];
    for (const s of samples) expect(sqlLiteral(s)).toBe(pg.Client.prototype.escapeLiteral(s));
  });
});
