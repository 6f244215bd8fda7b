/**
 * A Lambda execution environment in a child process, for {@link ChildInvoker}: imports the
 * function's module (its init phase: the pool, the handler at module scope), then runs one
 * invocation at a time as the parent asks. argv[2]: the module's path; it exports `handler`.
 */
import { pathToFileURL } from 'node:url';
import { invocationContext, type SqsFunction } from './invoker.js';
import type { FromRuntime, ToRuntime } from './runtime-protocol.js';

const modulePath = process.argv[2];
if (modulePath === undefined) throw new Error('usage: runtime-child <function module>');
const mod = (await import(pathToFileURL(modulePath).href)) as { handler?: SqsFunction };
const handler = mod.handler;
if (typeof handler !== 'function') throw new Error(`${modulePath} exports no handler`);

const send = (message: FromRuntime): void => {
  process.send?.(message);
};

process.on('message', (message: ToRuntime) => {
  if (message.type !== 'invoke') return;
  handler(message.event, invocationContext(message.deadline)).then(
    (response) => send({ type: 'answer', id: message.id, response: response ?? null }),
    (error: unknown) => send({ type: 'error', id: message.id, message: String(error) }),
  );
});
process.on('disconnect', () => process.exit(0));
send({ type: 'ready' });
