/**
 * Just enough of the Postgres wire protocol (v3) for the failover proxy to see a claim's
 * COMMIT go by and its answer come back: message framing, the simple-query text and
 * the command tags. Nothing is altered; a connection that does not start with a plain
 * StartupMessage (SSL, GSS or cancel requests) is not read at all.
 */

/** One complete message: its type byte, and its body when the reader was asked to keep it. */
export interface Frame {
  type: string;
  body: Buffer | undefined;
}

/** Protocol 3.0, the first int32 of a plain StartupMessage. */
const PROTOCOL_3 = 196_608;

/** Bodies kept at most (a claim's COMMIT round trip is a few hundred bytes). */
const KEEP_LIMIT = 64 * 1024;

/**
 * Splits one direction of a connection into messages. The frontend's first message has
 * no type byte (`startup`); every other message is a type byte and an int32 length
 * that counts itself. `keep(type)` says whose bodies to return; the rest are skipped
 * without copying.
 */
export class FrameReader {
  private header = Buffer.alloc(0);
  private type = '';
  private remaining = 0;
  private kept: Buffer[] | undefined;
  private startup: boolean;
  /** The stream is not plain protocol 3 (TLS, a cancel request): nothing more is read. */
  opaque = false;

  constructor(
    startup: boolean,
    private readonly keep: (type: string) => boolean,
  ) {
    this.startup = startup;
  }

  /** The messages that `chunk` completes, in order. */
  push(chunk: Buffer): Frame[] {
    const frames: Frame[] = [];
    let at = 0;
    while (at < chunk.length && !this.opaque) {
      if (this.remaining === 0 && this.kept === undefined) {
        const need = this.startup ? 8 : 5;
        const take = Math.min(need - this.header.length, chunk.length - at);
        this.header = Buffer.concat([this.header, chunk.subarray(at, at + take)]);
        at += take;
        if (this.header.length < need) break;
        if (this.startup) {
          this.startup = false;
          if (this.header.readInt32BE(4) !== PROTOCOL_3) {
            this.opaque = true;
            break;
          }
          this.type = '';
          this.remaining = this.header.readInt32BE(0) - 8;
        } else {
          this.type = String.fromCharCode(this.header[0] ?? 0);
          this.remaining = this.header.readInt32BE(1) - 4;
        }
        this.header = Buffer.alloc(0);
        this.kept = this.keep(this.type) && this.remaining <= KEEP_LIMIT ? [] : undefined;
        if (this.remaining < 0) {
          this.opaque = true;
          break;
        }
      }
      const take = Math.min(this.remaining, chunk.length - at);
      this.kept?.push(chunk.subarray(at, at + take));
      at += take;
      this.remaining -= take;
      if (this.remaining === 0) {
        frames.push({ type: this.type, body: this.kept && Buffer.concat(this.kept) });
        this.kept = undefined;
      }
    }
    return frames;
  }
}

/** A simple-query message's SQL text (the body is a NUL-terminated string). */
export function queryText(body: Buffer): string {
  const end = body.indexOf(0);
  return body.toString('utf8', 0, end === -1 ? body.length : end);
}

/** A CommandComplete message's tag (`COMMIT`, `ROLLBACK`, `INSERT 0 1`, ...). */
export function commandTag(body: Buffer): string {
  return queryText(body);
}

/**
 * The library's verified COMMIT (src/store/commit.ts `commitClaimSql`): a check that
 * the claim's transaction `xid` still runs, then COMMIT, in one simple query. The xid
 * is what the harness asks `pg_xact_status` about on the new primary.
 */
const CLAIM_COMMIT =
  /pg_current_xact_id_if_assigned\(\) IS NOT DISTINCT FROM '(\d+)'::xid8[\s\S]*\bCOMMIT;?\s*$/;

/** The claim transaction's xid when `sql` is a claim's COMMIT round trip. */
export function claimCommitXid(sql: string): string | undefined {
  return CLAIM_COMMIT.exec(sql)?.[1];
}
