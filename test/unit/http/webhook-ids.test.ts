import { describe, expect, it } from '@jest/globals';
import { bodyFieldSource, WebhookDeliveryIdInvalidError } from '../../../src/http/index.js';

const request = new Request('http://localhost/hook', { method: 'POST' });
const read = (path: string | string[], text: string): string | undefined =>
  bodyFieldSource('acme', path).deliveryId(request, new TextEncoder().encode(text));

describe('bodyFieldSource reads the id from the body text, losslessly', () => {
  it('keeps the digits of an integer and the characters of a string', () => {
    expect(read('event_id', '{"event_id": 9007199254740993}')).toBe('9007199254740993');
    expect(read('event_id', '{"event_id": 9007199254740992}')).toBe('9007199254740992');
    expect(read('event_id', '{"event_id": -42}')).toBe('-42');
    expect(read('event_id', '{"event_id": " evt_1 "}')).toBe(' evt_1 ');
    expect(read(['data', '0', 'id'], '{"data": [{"id": "a"}]}')).toBe('a');
  });

  it('has no id when the field is absent, null, or the body is not JSON', () => {
    expect(read('id', '{"other": 1}')).toBeUndefined();
    expect(read('id', '{"id": null}')).toBeUndefined();
    expect(read('id', 'id=1')).toBeUndefined();
    expect(read(['a', 'id'], '{"a": 5}')).toBeUndefined();
    // Inherited properties are not fields of the body.
    expect(read('constructor', '{}')).toBeUndefined();
    expect(read(['a', 'toString'], '{"a": {}}')).toBeUndefined();
  });

  it.each([['1.5'], ['1.0'], ['1e3'], ['1E+3'], ['-0'], ['false'], ['{}'], ['[]'], ['""']])(
    'refuses %s with WebhookDeliveryIdInvalidError',
    (id) => {
      expect(() => read('id', `{"id": ${id}}`)).toThrow(WebhookDeliveryIdInvalidError);
    },
  );

  it('refuses a body giving the field twice with different values (JSON.parse keeps the last)', () => {
    expect(() => read('id', '{"id": "a", "id": "b"}')).toThrow(WebhookDeliveryIdInvalidError);
    expect(read('id', '{"id": "a", "id": "a"}')).toBe('a');
  });

  it('refuses JSON nested too deeply to read exactly, naming why', () => {
    const deep = `{"id": "a", "pad": ${'['.repeat(100_000)}${']'.repeat(100_000)}}`;
    expect(() => read('id', deep)).toThrow(/nested too deeply/);
    expect(() => read('id', '{"id": "a", "id": "b"}')).toThrow(/twice/);
  });

  it('names the field in the error', () => {
    try {
      read(['event', 'id'], '{"event": {"id": 1.5}}');
      throw new Error('not refused');
    } catch (error) {
      expect(error).toBeInstanceOf(WebhookDeliveryIdInvalidError);
      expect((error as WebhookDeliveryIdInvalidError).code).toBe('EO_WEBHOOK_ID_INVALID');
      expect((error as WebhookDeliveryIdInvalidError).field).toBe(
        '"event.id" field of the JSON body',
      );
    }
  });
});
