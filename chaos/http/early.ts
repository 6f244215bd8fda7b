import type pg from 'pg';
import { quoteIdentifier } from '../../src/store/identifiers.js';
import type { ExchangeRecord } from '../../kit/fault-proxy.js';
import { sleep } from '../../src/sleep.js';
import { faultTables } from './fault-db.js';

/** What an answer's head says: its status, and the run it names (`x-chaos-answer`). */
export interface AnswerHead {
  status: number | undefined;
  op: string | undefined;
  run: number | undefined;
}

/** Parses the status line and `x-chaos-answer` out of an HTTP/1.x response head. */
export function parseAnswerHead(head: Buffer): AnswerHead {
  const end = head.indexOf('\r\n\r\n');
  const lines = head.toString('latin1', 0, end === -1 ? head.length : end).split('\r\n');
  const status = /^HTTP\/1\.[01] (\d{3})/.exec(lines[0] ?? '')?.[1];
  let op: string | undefined;
  let run: number | undefined;
  for (const line of lines.slice(1)) {
    const m = /^x-chaos-answer:\s*(\S+) (\d+)\s*$/i.exec(line);
    if (m) [op, run] = [m[1], Number(m[2])];
  }
  return { status: status === undefined ? undefined : Number(status), op, run };
}

/**
 * Early answers: answers that reached the client before their COMMIT. The fault
 * proxies hold the head of every answer until {@link beforeAnswer} has looked: a 2xx
 * whose effect a fresh snapshot cannot see at that moment left the server before its
 * transaction committed. It cannot fire falsely: a server that answers after COMMIT
 * returned has made the effect visible to every snapshot taken later, and this one is
 * taken after the server sent the bytes. (The reverse can slip through: a COMMIT that
 * completes between the send and this look.) The effect looked for is the run's `main`
 * row named by `x-chaos-answer`, or, for the payment API, the key's charge.
 */
export class EarlyAnswers {
  /** 2xx answers whose effect was not visible when they reached the client. */
  early = 0;
  /** The idempotency keys of the early answers (an async failover's window may excuse some). */
  readonly earlyKeys: string[] = [];
  /** 2xx answers looked at. */
  checked = 0;
  /** 2xx answers that could not be looked at (Postgres down): neither early nor not. */
  unchecked = 0;
  readonly examples: string[] = [];

  constructor(
    private readonly pool: pg.Pool,
    private readonly schema: string,
  ) {}

  /**
   * FaultProxy's `beforeAnswer` for the payment API (the effect: the key's charge) or
   * the fault routes (the run named by `x-chaos-answer`, else any run of the operation
   * the request named: a 2xx that names no run claims success all the same).
   */
  hook(server: 'payments' | 'faults'): (exchange: ExchangeRecord, head: Buffer) => Promise<void> {
    return (exchange, head) => this.look(server, exchange, head);
  }

  private async look(
    server: 'payments' | 'faults',
    exchange: ExchangeRecord,
    head: Buffer,
  ): Promise<void> {
    const answer = parseAnswerHead(head);
    if (answer.status === undefined || answer.status < 200 || answer.status > 299) return;
    const effects = faultTables(this.schema).effects;
    const query =
      server === 'payments'
        ? {
            text: `SELECT 1 FROM ${quoteIdentifier(this.schema)}.charges WHERE idem_key = $1`,
            values: [exchange.key],
          }
        : answer.op !== undefined
          ? {
              text: `SELECT 1 FROM ${effects} WHERE op = $1 AND run = $2 AND part = 'main'`,
              values: [answer.op, answer.run],
            }
          : {
              text: `SELECT 1 FROM ${effects} WHERE op = $1 AND part = 'main'`,
              values: [exchange.key],
            };
    if (exchange.key === undefined && answer.op === undefined) return;
    const found = await Promise.race([
      this.pool.query(query).then(
        (r) => (r.rowCount ?? 0) > 0,
        () => undefined,
      ),
      sleep(1000).then(() => undefined),
    ]);
    if (found === undefined) {
      this.unchecked++;
      return;
    }
    this.checked++;
    if (found) return;
    this.early++;
    if (exchange.key !== undefined) this.earlyKeys.push(exchange.key);
    if (this.examples.length < 5)
      this.examples.push(
        `${exchange.key ?? '?'} (${answer.status}, run ${answer.run ?? 'unnamed'})`,
      );
  }
}
