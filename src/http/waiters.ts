import type { StoredRecord } from './store.js';

/** What a request's turn at its key is, once it comes (see {@link KeyFlights.enter}). */
export type Turn =
  /**
   * Its turn to claim (and maybe run): nobody of this process is ahead. `waitedMs` went
   * by waiting behind the one ahead; `done` hands over, with the key's committed row when
   * the turn ended with one (executed, replayed), else undefined (rolled back, failed).
   */
  | { kind: 'claim'; waitedMs: number; done: (record: StoredRecord | undefined) => void }
  /** The one ahead ended with the key's committed row: answer from it (replay or mismatch). */
  | { kind: 'stored'; record: StoredRecord }
  /** Still waiting after `lockTimeoutMs`: 409, as a claim that waited that long. */
  | { kind: 'timeout' }
  /** The shutdown's hard stop came first: nothing starts. */
  | { kind: 'stopped' };

interface Waiter {
  /** Wakes the waiter with its turn (once; it forgets its timer and listener). */
  wake(turn: Turn): void;
}

/**
 * Single flight per key: the requests of one `(scope, key)` in this process go to the
 * database one at a time, the others wait here, holding nothing but memory. When the
 * one ahead ends with the key's committed row (it executed, or replayed a row another
 * instance committed), every waiter is answered from that row at once, each checked
 * against its own request (a retry with another body gets the mismatch answer, not the
 * original's response). When it ends without one (rolled back, failed, busy), the next
 * waiter takes its turn and claims afresh, so at most one connection per key per process
 * waits on a key's row lock, whatever the size of the burst.
 *
 * Only this process's requests are known here: a key another instance runs is found by
 * the claim itself, which waits on its row lock (bounded by `lockTimeoutMs` and the hard stop).
 */
export class KeyFlights {
  /** Keys with a request at the database; the waiters behind it, in arrival order. */
  private readonly flights = new Map<string, Waiter[]>();

  constructor(private readonly hardStop: AbortSignal) {}

  /**
   * The request's turn at `(scope, key)`: at once when nobody of this process is ahead,
   * else when the one ahead hands over, `lockTimeoutMs` runs out or the hard stop comes. A
   * `claim` turn must be handed over with `done`, whatever happens.
   */
  enter(scope: string, key: string, waitMs: number): Promise<Turn> {
    // Scope and key together are the key space (the primary key of the table, which
    // belongs to this instance): the same key in two scopes never waits on the other.
    const id = JSON.stringify([scope, key]);
    const waiters = this.flights.get(id);
    if (waiters === undefined) {
      this.flights.set(id, []);
      return Promise.resolve(this.claimTurn(id, 0));
    }
    if (this.hardStop.aborted) return Promise.resolve({ kind: 'stopped' });
    return new Promise<Turn>((resolve) => {
      const since = performance.now();
      const stop = this.hardStop;
      const leave = (): void => {
        const at = waiters.indexOf(waiter);
        if (at >= 0) waiters.splice(at, 1);
      };
      const onStop = (): void => {
        leave();
        waiter.wake({ kind: 'stopped' });
      };
      const timer = setTimeout(() => {
        leave();
        waiter.wake({ kind: 'timeout' });
      }, waitMs);
      let woken = false;
      const waiter: Waiter = {
        wake: (turn) => {
          if (woken) return;
          woken = true;
          clearTimeout(timer);
          stop.removeEventListener('abort', onStop);
          resolve(turn.kind === 'claim' ? { ...turn, waitedMs: performance.now() - since } : turn);
        },
      };
      stop.addEventListener('abort', onStop, { once: true });
      waiters.push(waiter);
    });
  }

  private claimTurn(id: string, waitedMs: number): Turn {
    let handed = false;
    return {
      kind: 'claim',
      waitedMs,
      done: (record) => {
        if (handed) return;
        handed = true;
        this.handOver(id, record);
      },
    };
  }

  /**
   * The request at the database ended: with the committed row, everyone waiting is
   * answered from it and the flight ends (a later request claims, a replay); without,
   * the next in line claims.
   */
  private handOver(id: string, record: StoredRecord | undefined): void {
    const waiters = this.flights.get(id) ?? [];
    if (record !== undefined || waiters.length === 0) {
      this.flights.delete(id);
      if (record !== undefined)
        for (const waiter of waiters) waiter.wake({ kind: 'stored', record });
      return;
    }
    waiters.shift()!.wake(this.claimTurn(id, 0));
  }
}
