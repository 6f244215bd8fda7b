/**
 * Tracks one partition's records from receipt to commit and answers "what may be
 * committed?": the offset after the highest record of the longest finished prefix.
 *
 * Kafka offsets can have gaps (compaction, transaction markers), so "contiguous" is
 * about the sequence of records *received*, not about consecutive integers: records
 * below the first one received were already committed by whoever fetched from there.
 * A record is finished when its effect committed, it proved a duplicate, or it was
 * dead-lettered; it is never finished by a retry or a release.
 */
export class OffsetTracker {
  /** Received offsets, ascending; `entries[head]` is the lowest unfinished one. */
  private entries: bigint[] = [];
  private head = 0;
  /** Finished offsets at or after `head` (out of order, waiting for the prefix). */
  private readonly finished = new Set<bigint>();
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
    this.lastReceived = offset;
    return true;
  }

  /** Marks a received record finished. Unknown or already finished offsets are ignored. */
  finish(offset: bigint): void {
    if (!this.isPending(offset)) return;
    this.finished.add(offset);
    while (this.head < this.entries.length) {
      const next = this.entries[this.head] as bigint;
      if (!this.finished.delete(next)) break;
      this.safeNext = next + 1n;
      this.head++;
    }
    this.compact();
  }

  /** Whether `offset` was received and is not finished yet. */
  isPending(offset: bigint): boolean {
    if (this.head >= this.entries.length) return false;
    if (offset < (this.entries[this.head] as bigint) || this.finished.has(offset)) return false;
    return binarySearch(this.entries, offset, this.head) >= 0;
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
    const committing = new Set(offsets.filter((offset) => this.isPending(offset)));
    if (committing.size === 0) return undefined;
    for (let i = this.head; i < this.entries.length; i++) {
      const candidate = this.entries[i] as bigint;
      if (!this.finished.has(candidate) && !committing.has(candidate)) return candidate;
    }
    return (this.lastReceived as bigint) + 1n;
  }

  private compact(): void {
    if (this.head > 1024 && this.head * 2 > this.entries.length) {
      this.entries = this.entries.slice(this.head);
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
