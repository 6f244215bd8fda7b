import type { PaymentProcess } from '../../kit/payments/spawn.js';

/** Every server or worker process the comparison has running, for an interrupted run. */
const running = new Set<PaymentProcess>();
let closed = false;

/** Registers a child until it exits; one started after {@link killChildren} is killed at once. */
export function track(child: PaymentProcess): PaymentProcess {
  if (closed) void child.kill();
  running.add(child);
  void child.exited.then(() => running.delete(child));
  return child;
}

/** SIGKILLs every child still running (Ctrl-C: nothing of theirs is worth waiting for). */
export async function killChildren(): Promise<number> {
  closed = true;
  const children = [...running];
  await Promise.all(children.map((child) => child.kill()));
  return children.length;
}
