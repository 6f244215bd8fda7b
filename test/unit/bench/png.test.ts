import { describe, expect, it } from '@jest/globals';
import { inflateSync } from 'node:zlib';
import { encodePng, Raster } from '../../../bench/chart/png.js';

describe('bench chart PNG encoder', () => {
  it('writes a valid signature, IHDR, CRCs and the pixels it was given', () => {
    const image = new Raster(3, 2, [255, 255, 255]);
    image.fill(1, 0, 1, 2, [10, 20, 30]);
    const png = encodePng(image);
    expect([...png.subarray(0, 8)]).toEqual([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
    expect(png.toString('latin1', 12, 16)).toBe('IHDR');
    expect(png.readUInt32BE(16)).toBe(3);
    expect(png.readUInt32BE(20)).toBe(2);
    // The IEND chunk of every PNG ends with the same well-known CRC.
    expect(png.subarray(png.length - 8).toString('hex')).toBe('49454e44ae426082');
    const idatLength = png.readUInt32BE(33);
    expect(png.toString('latin1', 37, 41)).toBe('IDAT');
    const raw = inflateSync(png.subarray(41, 41 + idatLength));
    expect([...raw]).toEqual([
      0, 255, 255, 255, 10, 20, 30, 255, 255, 255, 0, 255, 255, 255, 10, 20, 30, 255, 255, 255,
    ]);
  });
});
