import { describe, expect, it } from '@jest/globals';
import { positional } from '../../../kit/data-layers/positional.js';

describe('kit/data-layers: positional', () => {
  it('turns $n into ? with the values in the order they appear, repeats included', () => {
    expect(positional('SELECT $2::int, $1::text, $2::int', ['a', 7])).toEqual({
      text: 'SELECT ?::int, ?::text, ?::int',
      values: [7, 'a', 7],
    });
  });
});
