/** A record of an ordering key, as far as holds are concerned. */
interface Keyed {
  readonly orderingKey: string;
  readonly offset: bigint;
}

/**
 * Per ordering key, the offsets of a partition being retried in place (backing off or
 * running again): nothing after them may start. A set, not one offset per key: several
 * records of a key can go back from one failure (a batch failing as a whole), and the
 * lowest finishing must not drop the hold of a higher one still backing off.
 */
export class HeldOffsets {
  private readonly byKey = new Map<string, Set<bigint>>();

  /** Whether any record of `orderingKey` is being retried. */
  has(orderingKey: string): boolean {
    return this.byKey.has(orderingKey);
  }

  hold(record: Keyed): void {
    let offsets = this.byKey.get(record.orderingKey);
    if (offsets === undefined) this.byKey.set(record.orderingKey, (offsets = new Set()));
    offsets.add(record.offset);
  }

  release(record: Keyed): void {
    const offsets = this.byKey.get(record.orderingKey);
    if (offsets?.delete(record.offset) === true && offsets.size === 0)
      this.byKey.delete(record.orderingKey);
  }

  /** Whether a lower offset of the record's key is being retried: the record must follow it. */
  behindLower(record: Keyed): boolean {
    for (const offset of this.byKey.get(record.orderingKey) ?? []) {
      if (offset < record.offset) return true;
    }
    return false;
  }
}
