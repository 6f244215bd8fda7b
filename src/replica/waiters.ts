/**
 * The pending waits of one poller, ordered so that one poll settles all it can.
 *
 * A waiter's target is not known when it is added: its commit's WAL position is covered
 * by the primary's insert position read by any poll *sent after* the waiter was added
 * (the commit record was written before that). So each poll takes a {@link mark} when
 * it is sent; its answer {@link assign}s its insert position to every waiter added before
 * the mark and releases every waiter whose target the standby's position reached. No
 * query per ack: one per tick serves all of them.
 */
export interface Waiter<T> {
  /** Order of arrival. */
  readonly seq: number;
  /** When it is given up on (a clock of the owner's). */
  readonly deadline: number;
  /** The insert position it waits for, once a poll sent after it answered. */
  target: bigint | undefined;
  readonly value: T;
}

export class WaiterQueue<T> {
  /** Added, target not known yet: in arrival order. */
  private unassigned: Waiter<T>[] = [];
  /** Target known: sorted by target. */
  private assigned: Waiter<T>[] = [];
  private nextSeq = 0;

  get size(): number {
    return this.unassigned.length + this.assigned.length;
  }

  add(value: T, deadline: number): Waiter<T> {
    const waiter: Waiter<T> = { seq: this.nextSeq++, deadline, target: undefined, value };
    this.unassigned.push(waiter);
    return waiter;
  }

  /** Taken when a poll is sent: the waiters it covers are those added before. */
  mark(): number {
    return this.nextSeq;
  }

  /** A poll sent at `mark` read the insert position `head`: the target of those it covers. */
  assign(mark: number, head: bigint): void {
    let covered = 0;
    while (covered < this.unassigned.length && this.unassigned[covered]!.seq < mark) covered++;
    for (const waiter of this.unassigned.splice(0, covered)) {
      waiter.target = head;
      this.insertSorted(waiter);
    }
  }

  /** Removes and returns the waiters whose target `position` reached. */
  release(position: bigint): Waiter<T>[] {
    let reached = 0;
    while (reached < this.assigned.length && this.assigned[reached]!.target! <= position) reached++;
    return this.assigned.splice(0, reached);
  }

  /** Removes and returns the waiters whose deadline is at or before `now`. */
  expire(now: number): Waiter<T>[] {
    const expired: Waiter<T>[] = [];
    const keep = (w: Waiter<T>): boolean => {
      if (w.deadline > now) return true;
      expired.push(w);
      return false;
    };
    this.unassigned = this.unassigned.filter(keep);
    this.assigned = this.assigned.filter(keep);
    return expired;
  }

  /** Removes and returns every waiter (the session that would confirm them is gone). */
  drain(): Waiter<T>[] {
    const all = [...this.unassigned, ...this.assigned];
    this.unassigned = [];
    this.assigned = [];
    return all;
  }

  /** The earliest deadline pending, if any. */
  nextDeadline(): number | undefined {
    let min: number | undefined;
    for (const w of this.unassigned) if (min === undefined || w.deadline < min) min = w.deadline;
    for (const w of this.assigned) if (min === undefined || w.deadline < min) min = w.deadline;
    return min;
  }

  // Targets arrive in poll order, and a session's insert position only grows: almost
  // always an append. The search keeps the order should a position ever come back lower.
  private insertSorted(waiter: Waiter<T>): void {
    const list = this.assigned;
    let lo = 0;
    let hi = list.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (list[mid]!.target! <= waiter.target!) lo = mid + 1;
      else hi = mid;
    }
    list.splice(lo, 0, waiter);
  }
}

/** A pg_lsn's text (`16/B374D848`) as a number. */
export function parseLsn(text: string): bigint {
  const slash = text.indexOf('/');
  if (slash <= 0 || !/^[0-9A-Fa-f]+\/[0-9A-Fa-f]+$/.test(text))
    throw new Error(`not a pg_lsn: ${text}`);
  return (BigInt(`0x${text.slice(0, slash)}`) << 32n) | BigInt(`0x${text.slice(slash + 1)}`);
}
