import type { FaultPoint, ToWorker } from './protocol.js';

/** A fleet child's side of the protocol (the consumer's workers, the outbox's processes). */
export interface FleetChild {
  /** Whether a stop was asked for: a receive loop ending before that is a failure. */
  stopping(): boolean;
}

/**
 * Serves the parent: `close` runs once, then the process exits 0, on SIGTERM, SIGINT or
 * the parent's `stop`; `arm` messages go to `onArm`; the process dies with its parent
 * (a killed parent sends no `stop`).
 */
export function serveFleet(
  close: () => Promise<void>,
  onArm: (point: FaultPoint) => void,
): FleetChild {
  let stopping: Promise<void> | undefined;
  const stop = (): Promise<void> =>
    (stopping ??= (async () => {
      await close();
      process.exit(0);
    })());
  process.on('SIGTERM', () => void stop());
  process.on('SIGINT', () => void stop());
  process.on('disconnect', () => process.exit(1));
  process.on('message', (message: ToWorker) => {
    if (message.type === 'stop') void stop();
    else if (message.type === 'arm') onArm(message.point);
  });
  return {
    stopping: () => stopping !== undefined,
  };
}
