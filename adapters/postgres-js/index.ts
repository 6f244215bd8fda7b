/**
 * `effectively-once/postgres-js`: the claim's transaction on postgres.js 4, opened with
 * `sql.begin`, so a handler's `ctx.tx` is the transaction's own `sql` and its effect is a
 * tagged template like any other in the app. `postgres` is an optional peer dependency.
 * @packageDocumentation
 * @module effectively-once/postgres-js
 */
export { postgresLayer } from './layer.js';
