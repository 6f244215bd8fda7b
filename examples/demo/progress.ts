/** Figures shown on the progress line. */
export interface ProgressState {
  applied: number;
  sent: number;
  deliveries: number;
  duplicates: number;
}

/**
 * A hand-written progress bar on stderr. On a TTY it redraws one line (and prints
 * notes above it); elsewhere (CI logs, pipes) it prints a plain line every 10 % and
 * every note, so logs stay readable.
 */
export class Progress {
  private readonly tty: boolean;
  private readonly started = Date.now();
  private lastDecile = -1;
  private state: ProgressState = { applied: 0, sent: 0, deliveries: 0, duplicates: 0 };

  constructor(
    private readonly total: number,
    private readonly stream: NodeJS.WriteStream = process.stderr,
  ) {
    this.tty = stream.isTTY === true && process.env['TERM'] !== 'dumb';
  }

  update(state: ProgressState): void {
    this.state = state;
    if (this.tty) {
      this.draw();
      return;
    }
    const decile = Math.floor((10 * Math.min(state.applied, this.total)) / Math.max(1, this.total));
    if (decile > this.lastDecile) {
      this.lastDecile = decile;
      this.stream.write(`${this.line()}\n`);
    }
  }

  /** Prints a line above the bar. */
  note(text: string): void {
    if (this.tty) {
      this.stream.write(`\r\x1b[2K  ${text}\n`);
      this.draw();
    } else {
      this.stream.write(`  ${text}\n`);
    }
  }

  /** Leaves the last state on screen and moves to a fresh line. */
  finish(): void {
    if (this.tty) {
      this.draw();
      this.stream.write('\n');
    } else {
      this.stream.write(`${this.line()}\n`);
    }
  }

  private draw(): void {
    this.stream.write(`\r\x1b[2K${this.line()}`);
  }

  private line(): string {
    const { applied, sent, deliveries, duplicates } = this.state;
    const width = 28;
    const ratio = Math.min(1, applied / Math.max(1, this.total));
    const filled = Math.round(ratio * width);
    const bar = this.tty
      ? `${'█'.repeat(filled)}${'░'.repeat(width - filled)}`
      : `${'#'.repeat(filled)}${'.'.repeat(width - filled)}`;
    const seconds = ((Date.now() - this.started) / 1000).toFixed(1);
    const pad = String(this.total).length;
    return (
      `[${bar}] ${String(applied).padStart(pad)}/${this.total} applied` +
      ` · ${sent} sent · ${deliveries} deliveries · ${duplicates} duplicates skipped · ${seconds}s`
    );
  }
}
