import { startFauxqs } from 'fauxqs';

/** A running in-process SQS emulator. */
export interface RunningSqs {
  endpoint: string;
  stop(): Promise<void>;
}

/**
 * Starts fauxqs, an SQS emulator that runs inside this Node process (no Docker, no
 * Java), on a free port. Queues are created through the ordinary SQS API afterwards,
 * exactly as against a real endpoint.
 */
export async function startEmbeddedSqs(): Promise<RunningSqs> {
  // `host` only names queue URLs (sqs.<region>.<host>); the client talks to `endpoint`.
  // An IP there would make the URL unparseable (a hostname may not end in a number).
  const server = await startFauxqs({ port: 0, host: 'localhost', logger: false });
  return {
    endpoint: `http://127.0.0.1:${server.port}`,
    stop: () => server.stop(),
  };
}
