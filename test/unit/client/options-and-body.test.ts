/**
 * Everything idempotentFetch refuses before sending: bad options, bad keys, bodies it
 * cannot replay. The URL's port (9) is on the Fetch standard's bad-port list, so a
 * call a check let through ends in a network error without touching the network, not
 * in the error expected here.
 */
import { describe, expect, it } from '@jest/globals';
import {
  ConfigurationError,
  EffectivelyOnceError,
  UnreplayableBodyError,
  idempotentFetch,
  type IdempotentFetchOptions,
} from '../../../src/client/index.js';
import { freezeBody } from '../../../src/client/body.js';

const url = 'http://127.0.0.1:9/charges';
const post = { method: 'POST' };

describe('options are checked when called', () => {
  it.each<[string, IdempotentFetchOptions]>([
    ['attempts', { attempts: 0 }],
    ['attempts', { attempts: 1.5 }],
    ['attempts', { attempts: 101 }],
    ['deadlineMs', { deadlineMs: 0 }],
    ['deadlineMs', { deadlineMs: 24 * 3600_000 }],
    ['deadlineMs', { deadlineMs: Number.NaN }],
    ['attemptTimeoutMs', { attemptTimeoutMs: -1 }],
    ['backoff.initialMs', { backoff: { initialMs: 0 } }],
    ['backoff.maxMs', { backoff: { initialMs: 500, maxMs: 100 } }],
    ['header', { header: 'Idempotency Key' }],
    ['header', { header: '' }],
    ['keyFormat', { keyFormat: 'json' as 'raw' }],
    ['key', { key: '' }],
    ['key', { key: 'x'.repeat(256) }],
    ['key', { key: 'has space' }],
    ['key', { key: 'has"quote' }],
    ['key', { key: 'back\\slash' }],
    ['key', { key: 'naïve' }],
    ['onRetry', { onRetry: 'log' as unknown as () => void }],
    ['json', { json: () => 1 }],
    ['json', { json: { n: 1n } }],
  ])('%s: %j → ConfigurationError naming it', async (option, options) => {
    const error = await idempotentFetch(url, post, options).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConfigurationError);
    expect(error).toMatchObject({ code: 'EO_CONFIGURATION', details: { option } });
  });

  it("the deadline error says why: the server's key lifetime", async () => {
    await expect(idempotentFetch(url, post, { deadlineMs: 25 * 3600_000 })).rejects.toThrow(
      /key lifetime/,
    );
  });

  it('json and init.body together are refused', async () => {
    await expect(idempotentFetch(url, { ...post, body: 'x' }, { json: {} })).rejects.toMatchObject({
      details: { option: 'json' },
    });
  });

  it('a key of 255 visible ASCII characters is accepted (it gets as far as the network)', async () => {
    const error = await idempotentFetch(url, post, {
      key: '~'.repeat(255),
      attempts: 1,
    }).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'EO_RETRIES_EXHAUSTED', attempts: 1 });
  });

  it.each<[string, string | URL, RequestInit]>([
    ['an invalid URL', 'not a url', post],
    ['an invalid header name', url, { ...post, headers: { 'bad header': '1' } }],
    ['a GET with a body', url, { method: 'GET', body: 'x' }],
  ])('%s is a ConfigurationError, not a retried network error', async (_what, input, init) => {
    const error = await idempotentFetch(input, init).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConfigurationError);
  });
});

describe('bodies that cannot be replayed are refused before sending', () => {
  const stream = () =>
    new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(new Uint8Array([1]));
        controller.close();
      },
    });
  async function* chunks() {
    yield new Uint8Array([1]);
  }

  it.each<[string, () => RequestInit['body']]>([
    ['ReadableStream', stream],
    ['async iterable', () => chunks()],
  ])('%s', async (kind, body) => {
    const error = await idempotentFetch(url, {
      ...post,
      body: body(),
      duplex: 'half',
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(UnreplayableBodyError);
    expect(error).toBeInstanceOf(EffectivelyOnceError);
    expect(error).toMatchObject({
      code: 'EO_UNREPLAYABLE_BODY',
      retryable: false,
      details: { kind },
    });
  });

  it('a Request input that carries its own body', async () => {
    const request = new Request(url, { method: 'POST', body: 'x' });
    await expect(idempotentFetch(request)).rejects.toMatchObject({
      code: 'EO_UNREPLAYABLE_BODY',
      details: { kind: 'Request' },
    });
  });
});

describe('freezeBody', () => {
  const text = (bytes: Uint8Array | undefined) => new TextDecoder().decode(bytes);

  it('no body: no bytes, no content type', async () => {
    expect(await freezeBody(undefined, undefined, false)).toEqual({
      bytes: undefined,
      contentType: null,
    });
  });

  it('json: JSON.stringify once, application/json', async () => {
    const frozen = await freezeBody(undefined, { a: [1, 'é'] }, true);
    expect(text(frozen.bytes)).toBe('{"a":[1,"é"]}');
    expect(frozen.contentType).toBe('application/json');
  });

  it('json null is a body ("null"), not an absence', async () => {
    expect(text((await freezeBody(undefined, null, true)).bytes)).toBe('null');
  });

  it('FormData: serialised once, so its random multipart boundary is fixed', async () => {
    const form = new FormData();
    form.append('a', '1');
    const frozen = await freezeBody(form, undefined, false);
    const boundary = /boundary=(.+)$/.exec(frozen.contentType ?? '')?.[1];
    expect(boundary).toBeDefined();
    expect(text(frozen.bytes)).toContain(`--${boundary}`);
  });

  it('a copy: mutating the source afterwards changes nothing', async () => {
    const source = new Uint8Array([1, 2, 3]);
    const frozen = await freezeBody(source, undefined, false);
    source.fill(0);
    expect([...(frozen.bytes ?? [])]).toEqual([1, 2, 3]);
  });
});
