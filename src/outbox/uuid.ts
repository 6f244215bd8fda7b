import { randomFillSync } from 'node:crypto';

// Monotonic state of this process: the last timestamp used and the 12-bit counter in
// rand_a (RFC 9562 §6.2, method 1), so ids minted in one millisecond still sort in
// the order they were minted.
let lastMs = 0;
let counter = 0;

/**
 * A UUIDv7 (RFC 9562): 48 bits of Unix time in ms, then a 12-bit counter seeded at
 * random each millisecond, then 62 random bits. Ids of one process sort by creation
 * (a clock that steps back keeps the last timestamp rather than go backwards); ids of
 * different processes sort by their clocks. Its randomness makes it a safe dedup key.
 */
export function uuidv7(now: number = Date.now()): string {
  const bytes = randomFillSync(new Uint8Array(16));
  if (now > lastMs) {
    lastMs = now;
    // Seed below half the range so the millisecond has room for 2048+ increments.
    counter = ((bytes[6]! & 0x07) << 8) | bytes[7]!;
  } else {
    counter++;
    if (counter > 0xfff) {
      // Counter exhausted: borrow the next millisecond rather than repeat or reorder.
      lastMs++;
      counter = 0;
    }
  }
  const ms = lastMs;
  bytes[0] = Math.floor(ms / 2 ** 40) & 0xff;
  bytes[1] = Math.floor(ms / 2 ** 32) & 0xff;
  bytes[2] = (ms >>> 24) & 0xff;
  bytes[3] = (ms >>> 16) & 0xff;
  bytes[4] = (ms >>> 8) & 0xff;
  bytes[5] = ms & 0xff;
  bytes[6] = 0x70 | (counter >>> 8); // version 7
  bytes[7] = counter & 0xff;
  bytes[8] = 0x80 | (bytes[8]! & 0x3f); // variant 10
  const hex = Buffer.from(bytes).toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** The Unix time in ms a UUIDv7 carries. */
export function uuidv7Time(id: string): number {
  return parseInt(id.replace(/-/g, '').slice(0, 12), 16);
}
