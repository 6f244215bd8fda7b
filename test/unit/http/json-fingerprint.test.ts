import { describe, expect, it } from '@jest/globals';
import { canonicalJson, fingerprint, type FingerprintInput } from 'effectively-once/http';

const request = (body: string): FingerprintInput => ({
  method: 'POST',
  route: '/transfers',
  search: '',
  body: Buffer.from(body),
  contentType: 'application/json; charset=utf-8',
});
const json = (body: string): Buffer => fingerprint(request(body), 'json');
const same = (a: string, b: string): boolean => json(a).equals(json(b));

describe("fingerprint: 'json' tells different requests apart", () => {
  it('integers past 2^53 keep their digits', () => {
    expect(same('{"amount":9007199254740993}', '{"amount":9007199254740992}')).toBe(false);
    expect(same('{"amount":12345678901234567890}', '{"amount":12345678901234567891}')).toBe(false);
  });

  it('numbers past the double range are not all null', () => {
    expect(same('{"amount":1e400}', '{"amount":2e400}')).toBe(false);
    expect(same('{"amount":1e400}', '{"amount":null}')).toBe(false);
    expect(same('[1e-400]', '[0]')).toBe(false);
  });

  it('duplicate keys with different values are not folded into the last one', () => {
    const doubled = '{"to":"alice","to":"mallory","amount":5}';
    expect(same(doubled, '{"to":"mallory","amount":5}')).toBe(false);
    expect(same(doubled, '{"to":"alice","amount":5}')).toBe(false);
    // Such a body counts by its bytes: a byte-identical retry still matches.
    expect(same(doubled, doubled)).toBe(true);
    expect(json(doubled).equals(fingerprint(request(doubled), 'raw'))).toBe(true);
  });

  it('key order, whitespace and string escapes still do not matter', () => {
    expect(
      same(
        '{"a":1,"b":{"c":[1,2],"d":"x"}}',
        ' { "b" : { "d":"\\u0078", "c":[ 1 , 2 ] },\n"a":1 } ',
      ),
    ).toBe(true);
    expect(same('{"to":"alice","to":"alice"}', '{"to":"alice"}')).toBe(true);
  });

  it('a number and the string of its digits stay different', () => {
    expect(same('{"a":1}', '{"a":"1"}')).toBe(false);
  });

  it('an integer body hashes as before (retries across an upgrade still match)', () => {
    // What the JSON.parse round trip gave for bodies it did not damage.
    expect(canonicalJson('{ "b": [ {"d": 1, "c": 2} ], "a": null, "s": "é\\n" }')).toBe(
      '{"a":null,"b":[{"c":2,"d":1}],"s":"é\\n"}',
    );
  });

  it('canonicalJson refuses what has no single canonical form', () => {
    expect(() => canonicalJson('{"to":"alice","to":"mallory"}')).toThrow(SyntaxError);
    expect(() => canonicalJson('{nope')).toThrow(SyntaxError);
    expect(canonicalJson(Buffer.from('{"n":9007199254740993}'))).toBe('{"n":9007199254740993}');
  });
});
