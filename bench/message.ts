/** The body every scenario sends: an id (0..N-1, used to verify the effect) and a send time. */
export interface BenchMessage {
  id: number;
  amountCents: number;
  /** `Date.now()` when the producer sent it; end-to-end latency runs from here to the commit. */
  sentAt: number;
}

export function newMessage(id: number, sentAt: number): BenchMessage {
  return { id, amountCents: 100 + (id % 9_900), sentAt };
}

export function encodeMessage(message: BenchMessage): string {
  return JSON.stringify(message);
}

/** Parses a body the bench produced; throws on anything else (a bench bug, not a case to handle). */
export function decodeMessage(body: string | Buffer | null | undefined): BenchMessage {
  if (body === null || body === undefined) throw new Error('bench message without a body');
  const parsed = JSON.parse(body.toString()) as Partial<BenchMessage>;
  if (
    typeof parsed.id !== 'number' ||
    typeof parsed.sentAt !== 'number' ||
    typeof parsed.amountCents !== 'number'
  ) {
    throw new Error(`not a bench message: ${body.toString().slice(0, 100)}`);
  }
  return parsed as BenchMessage;
}
