/**
 * `effectively-once/drizzle`: the claim's transaction on Drizzle ORM, over node-postgres
 * or postgres.js, opened with `db.transaction`, so a handler's `ctx.tx` is the Drizzle
 * transaction and its effect is written with Drizzle's query builder. `drizzle-orm` is an
 * optional peer dependency (with `pg` or `postgres`, whichever driver the app uses).
 * @packageDocumentation
 * @module effectively-once/drizzle
 */
export { drizzleLayer } from './layer.js';
