/**
 * Tracks one partition's records from receipt to commit and answers "what may be
 * committed?": the offset after the highest record of the longest finished prefix.
 *
 * Kafka offsets can have gaps (compaction, transaction markers), so "contiguous" is
 * about the sequence of records *received*, not about consecutive integers: records
 * below the first one received were already committed by whoever fetched from there.
 * A record is finished when its effect committed, it proved a duplicate, or it was
 * dead-lettered; it is never finished by a retry or a release.
 *
 * Finished records are flags beside the received offsets (found by binary search), not
 * a set of bigints: hashing a bigint per record into and out of a set showed in the
 * profile of batch mode.
 */
export class OffsetTracker {
  /** Received offsets, ascending; `entries[head]` is the lowest unfinished one. */
  private entries: bigint[] = [];
  /** `done[i]`: `entries[i]` is finished (only read at or after `head`). */
  private done: boolean[] = [];
  private head = 0;
  private safeNext: bigint | undefined;
  private committedNext: bigint | undefined;
  private lastReceived: bigint | undefined;

  /** Records received and not yet in the finished prefix. */
  get pending(): number {
    return this.entries.length - this.head;
  }

  /** Highest offset received so far. */
  get last(): bigint | undefined {
    return this.lastReceived;
  }

  /**
   * Registers a received record. Offsets must rise: an offset at or below the last one
   * (a refetch) is refused with false, because this tracker already holds that record.
   */
  add(offset: bigint): boolean {
    if (this.lastReceived !== undefined && offset <= this.lastReceived) return false;
    this.entries.push(offset);
    this.done.push(false);
    this.lastReceived = offset;
    return true;
  }

  /** Marks a received record finished. Unknown or already finished offsets are ignored. */
  finish(offset: bigint): void {
    const at = this.pendingIndex(offset);
    if (at < 0) return;
    this.done[at] = true;
    while (this.head < this.entries.length && this.done[this.head] === true) {
      this.safeNext = (this.entries[this.head] as bigint) + 1n;
      this.head++;
    }
    this.compact();
  }

  /** Whether `offset` was received and is not finished yet. */
  isPending(offset: bigint): boolean {
    return this.pendingIndex(offset) >= 0;
  }

  /** Next offset to commit: every received record below it is finished. */
  get commitPoint(): bigint | undefined {
    return this.safeNext;
  }

  /** The commit point if it moved past the last one committed, else undefined. */
  uncommitted(): bigint | undefined {
    const next = this.safeNext;
    if (next === undefined) return undefined;
    return this.committedNext === undefined || next > this.committedNext ? next : undefined;
  }

  /** Records that a commit of `next` succeeded. */
  markCommitted(next: bigint): void {
    if (this.committedNext === undefined || next > this.committedNext) this.committedNext = next;
  }

  /** The last commit point that succeeded. */
  get committed(): bigint | undefined {
    return this.committedNext;
  }

  /**
   * The next offset that may be stored once the transaction finishing the pending
   * records `offsets` commits (one record, or a batch's): past every record that is
   * then finished in an unbroken run from the lowest unfinished one, else that lowest
   * unfinished record (which this transaction does not finish). Undefined when none of
   * `offsets` is pending.
   */
  storableAfter(offsets: readonly bigint[]): bigint | undefined {
    const committing = new Set<number>();
    for (const offset of offsets) {
      const at = this.pendingIndex(offset);
      if (at >= 0) committing.add(at);
    }
    if (committing.size === 0) return undefined;
    for (let i = this.head; i < this.entries.length; i++) {
      if (this.done[i] !== true && !committing.has(i)) return this.entries[i];
    }
    return (this.lastReceived as bigint) + 1n;
  }

  /** The index of `offset` in `entries` if it is pending, else -1. */
  private pendingIndex(offset: bigint): number {
    if (this.head >= this.entries.length || offset < (this.entries[this.head] as bigint)) return -1;
    // Records mostly finish in offset order: the lowest pending one first.
    if (offset === this.entries[this.head]) return this.head;
    const at = binarySearch(this.entries, offset, this.head);
    return at >= 0 && this.done[at] !== true ? at : -1;
  }

  private compact(): void {
    if (this.head > 1024 && this.head * 2 > this.entries.length) {
      this.entries = this.entries.slice(this.head);
      this.done = this.done.slice(this.head);
      this.head = 0;
    }
  }
}

function binarySearch(sorted: bigint[], value: bigint, from: number): number {
  let lo = from;
  let hi = sorted.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >>> 1;
    const v = sorted[mid] as bigint;
    if (v === value) return mid;
    if (v < value) lo = mid + 1;
    else hi = mid - 1;
  }
  return -1;
}
