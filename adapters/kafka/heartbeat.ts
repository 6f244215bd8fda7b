/** How often the group is heartbeated while a batch or a record waits on something else. */
const HEARTBEAT_WHILE_WAITING_MS = 1000;

/**
 * Waits for `work` (which must never reject), heartbeating the consumer group meanwhile
 * so a long wait (stored offsets loading, a retry's backoff) does not get the member
 * evicted. A rebalance makes `heartbeat()` throw: that propagates to kafkajs, which
 * abandons the batch as it should.
 */
export async function heartbeatWhile(
  work: Promise<void>,
  payload: { heartbeat(): Promise<void> },
): Promise<void> {
  let done = false;
  void work.then(() => (done = true));
  for (;;) {
    let timer: NodeJS.Timeout | undefined;
    const tick = new Promise<void>(
      (resolve) => (timer = setTimeout(resolve, HEARTBEAT_WHILE_WAITING_MS)),
    );
    await Promise.race([work, tick]);
    clearTimeout(timer);
    if (done) return;
    await payload.heartbeat();
  }
}
