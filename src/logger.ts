import type { Logger } from './types.js';

/** A logger that drops everything: the default, since libraries should not print. */
export const silentLogger: Logger = {
  debug: () => undefined,
  info: () => undefined,
  warn: () => undefined,
  error: () => undefined,
};
