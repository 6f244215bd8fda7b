import type { Request } from 'express';
import type { Socket } from 'node:net';
import { emit } from '../../kit/payments/child-protocol.js';
import { ARM_HEADER, type ArmMode } from './contenders.js';

/**
 * Where an armed request dies: right after its charge committed, before anything is
 * answered. The handler `arm`s it from the request's header; the contender's wiring
 * calls `reached` at that point (effectively-once: its `onCommitted` hook).
 */
export class CrashPoint {
  private readonly armed = new Map<string, { mode: ArmMode; socket: Socket }>();

  arm(req: Request, key: string): void {
    const mode = req.get(ARM_HEADER);
    if (mode === 'kill' || mode === 'drop') this.armed.set(key, { mode, socket: req.socket });
  }

  reached(key: string): void {
    emit({ t: 'committed', key });
    const armed = this.armed.get(key);
    if (armed === undefined) return;
    this.armed.delete(key);
    // No cleanup, no goodbye: the process is gone with the charge committed.
    if (armed.mode === 'kill') process.kill(process.pid, 'SIGKILL');
    // The answer is lost on the way; the server lives on and finishes as it would.
    else armed.socket.destroy();
  }
}
