/**
 * The records of one ordering key waiting to start, in offset order. A head index
 * instead of `Array.shift`: with a key per partition (keyConcurrency 1) the queue holds
 * the partition's whole fetched backlog, and shifting thousands of entries per record
 * showed up as the adapter's largest cost.
 */
export class RecordQueue<R extends { readonly offset: bigint }> {
  private items: R[] = [];
  private head = 0;

  get length(): number {
    return this.items.length - this.head;
  }

  push(item: R): void {
    this.items.push(item);
  }

  /** Takes the oldest record (the caller checks `length` first). */
  shift(): R {
    const item = this.items[this.head] as R;
    this.items[this.head] = undefined as unknown as R;
    this.head++;
    if (this.head === this.items.length) {
      this.items = [];
      this.head = 0;
    } else if (this.head >= 1024 && this.head * 2 >= this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
    return item;
  }

  /** Puts a record taken back in front of the later ones (rare: a retry in pipeline mode). */
  insertByOffset(item: R): void {
    if (this.head > 0) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
    const at = this.items.findIndex((other) => other.offset > item.offset);
    this.items.splice(at === -1 ? this.items.length : at, 0, item);
  }
}
