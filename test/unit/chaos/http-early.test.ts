/**
 * The early-answer check (chaos/http/early.ts) and the proxy hook it rides on
 * (kit/fault-proxy.ts `beforeAnswer`): the client gets no byte of an answer
 * before the check has looked (so the look is after the server sent it and before the
 * client saw it), delayed answers are looked at when released, and only a 2xx whose
 * effect is not visible then counts. A real proxy and server on loopback; the database
 * lookup is a fake.
 */
import { afterEach, describe, expect, it } from '@jest/globals';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type pg from 'pg';
import { EarlyAnswers, parseAnswerHead } from '../../../chaos/http/early.js';
import { FaultProxy, type ExchangeRecord } from '../../../kit/fault-proxy.js';

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** A server answering `status` with `x-chaos-answer: <key> 7`. */
async function server(status: number): Promise<number> {
  const s = http.createServer((req, res) => {
    res.writeHead(status, { 'x-chaos-answer': `${String(req.headers['x-chaos-op'])} 7` });
    res.end('{"ok":true}');
  });
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  cleanups.push(() => new Promise((resolve) => s.close(() => resolve())));
  return (s.address() as AddressInfo).port;
}

async function proxy(
  port: number,
  beforeAnswer: (exchange: ExchangeRecord, head: Buffer) => Promise<void>,
  delay = 0,
): Promise<FaultProxy> {
  const p = await FaultProxy.start({
    target: { host: '127.0.0.1', port },
    keyHeader: 'x-chaos-op',
    faults: { delay },
    delayMs: 200,
    beforeAnswer,
  });
  cleanups.push(() => p.close());
  return p;
}

const post = (url: string, op: string): Promise<Response> =>
  fetch(url, { method: 'POST', headers: { 'x-chaos-op': op }, body: '{}' });

/** A pool whose every lookup finds a row (`true`), none (`false`), or fails. */
function pool(found: boolean | 'down'): pg.Pool {
  const query = async (): Promise<{ rowCount: number }> => {
    if (found === 'down') throw new Error('connection refused');
    return { rowCount: found ? 1 : 0 };
  };
  return { query } as unknown as pg.Pool;
}

describe('FaultProxy beforeAnswer', () => {
  it('holds the answer until the hook settles, and hands it the head', async () => {
    const port = await server(201);
    const seen: string[] = [];
    let release: () => void = () => undefined;
    const p = await proxy(port, async (exchange, head) => {
      seen.push(`${exchange.key} ${String(parseAnswerHead(head).status)}`);
      await new Promise<void>((resolve) => (release = resolve));
    });
    let answered = false;
    const response = post(p.url, 'op-1').then((r) => ((answered = true), r));
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect({ seen, answered }).toEqual({ seen: ['op-1 201'], answered: false });
    release();
    expect((await response).status).toBe(201);
    expect(await (await response).text()).toBe('{"ok":true}');
  });

  it('looks at a delayed answer when it is released, not before', async () => {
    const port = await server(200);
    const started = Date.now();
    let lookedAt = 0;
    const p = await proxy(port, async () => void (lookedAt = Date.now() - started), 1);
    expect((await post(p.url, 'op-2')).status).toBe(200);
    expect(lookedAt).toBeGreaterThanOrEqual(190);
  });
});

describe('EarlyAnswers', () => {
  const run = async (status: number, found: boolean | 'down'): Promise<EarlyAnswers> => {
    const early = new EarlyAnswers(pool(found), 'chaos_x');
    const p = await proxy(await server(status), early.hook('faults'));
    await (await post(p.url, 'op-3')).text();
    return early;
  };

  it('counts a 2xx whose effect is not visible when the client gets it', async () => {
    expect(await run(201, false)).toMatchObject({ early: 1, checked: 1, unchecked: 0 });
    expect((await run(201, false)).examples).toEqual(['op-3 (201, run 7)']);
  });

  it('does not count a 2xx whose effect is visible, nor a 5xx, nor what it could not look at', async () => {
    expect(await run(201, true)).toMatchObject({ early: 0, checked: 1 });
    expect(await run(503, false)).toMatchObject({ early: 0, checked: 0 });
    expect(await run(200, 'down')).toMatchObject({ early: 0, checked: 0, unchecked: 1 });
  });

  it('reads the status and the run out of a head', () => {
    const head = Buffer.from('HTTP/1.1 201 Created\r\nX-Chaos-Answer: stream-3 42\r\n\r\nbody');
    expect(parseAnswerHead(head)).toEqual({ status: 201, op: 'stream-3', run: 42 });
    expect(parseAnswerHead(Buffer.from('HTTP/1.1 200 OK\r\n\r\n'))).toEqual({
      status: 200,
      op: undefined,
      run: undefined,
    });
  });
});
