import type { PaymentProcess } from '../../test/helpers/http/spawn.js';

/** Every server or worker process the comparison has running, for an interrupted run. */
const running = new Set<PaymentProcess>();

/** Registers a child until it exits. */
export function track(child: PaymentProcess): PaymentProcess {
  running.add(child);
  void child.exited.then(() => running.delete(child));
  return child;
}

/** SIGKILLs every child still running (Ctrl-C: nothing of theirs is worth waiting for). */
export async function killChildren(): Promise<number> {
  const children = [...running];
  await Promise.all(children.map((child) => child.kill()));
  return children.length;
}
