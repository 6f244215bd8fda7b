import { describe, expect, it } from '@jest/globals';
import { EventHub } from '../../../src/event-hub.js';
import type { Logger } from '../../../src/types.js';

interface Events {
  done: { n: number };
  error: Error;
}

function recordingLogger(): { logger: Logger; lines: string[] } {
  const lines: string[] = [];
  const log = (_: unknown, msg?: string): void => {
    lines.push(msg ?? '');
  };
  return { logger: { debug: log, info: log, warn: log, error: log }, lines };
}

describe('the shared event hub', () => {
  it('delivers to listeners until they leave, and says whether anyone listens', () => {
    const hub = new EventHub<Events>(recordingLogger().logger, 'test door');
    const got: number[] = [];
    const listener = (payload: { n: number }): void => {
      got.push(payload.n);
    };
    expect(hub.listens('done')).toBe(false);
    hub.on('done', listener);
    expect(hub.listens('done')).toBe(true);
    hub.emit('done', { n: 1 });
    hub.off('done', listener);
    hub.emit('done', { n: 2 });
    expect(got).toEqual([1]);
    expect(hub.listens('done')).toBe(false);
  });

  it('logs an error nobody listens for instead of throwing it, naming the door', () => {
    const { logger, lines } = recordingLogger();
    const hub = new EventHub<Events>(logger, 'test door');
    expect(() => hub.emit('error', new Error('boom'))).not.toThrow();
    expect(lines).toEqual(['effectively-once: unhandled test door error']);
  });

  it('logs a listener that throws, and the emit returns normally', () => {
    const { logger, lines } = recordingLogger();
    const hub = new EventHub<Events>(logger, 'test door');
    hub.on('done', () => {
      throw new Error('listener bug');
    });
    expect(() => hub.emit('done', { n: 1 })).not.toThrow();
    expect(lines).toEqual(['effectively-once: test door event listener threw']);
  });
});
