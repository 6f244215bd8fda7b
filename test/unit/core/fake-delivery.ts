import type { Delivery } from '../../../src/index.js';

/** A delivery whose broker operations all succeed at once, for the dispatchers' unit tests. */
export function delivery(id: string, orderingKey?: string): Delivery<string> {
  const noop = async () => undefined;
  return {
    key: id,
    body: id,
    payload: id,
    raw: id,
    attempt: 1,
    orderingKey,
    ack: noop,
    retry: noop,
    deadLetter: noop,
    release: noop,
  };
}
