/**
 * The steps bench's payment provider (kit/provider) in a process of its own, so the
 * load generator and the server do not share its CPU. Prints `{"port":N}` once listening;
 * SIGTERM stops it.
 */
import { writeSync } from 'node:fs';
import { startProvider } from '../../kit/provider/provider.js';

const provider = await startProvider();
writeSync(1, `${JSON.stringify({ port: provider.port })}\n`);
const stop = (): void => void provider.close().then(() => process.exit(0));
process.once('SIGTERM', stop);
process.once('SIGINT', stop);
