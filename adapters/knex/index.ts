/**
 * `effectively-once/knex`: the claim transaction in Knex 3 over Postgres (`client: 'pg'`).
 * Pass `knexLayer(knex)` as a door's `dataLayer`: the handler's `ctx.tx` is the
 * `Knex.Transaction` of `knex.transaction(…)`, and the claim, the effect written with
 * Knex's query builder and the stored answer commit together. `knex` 3 is an optional
 * peer dependency; this entry imports only its types.
 * @packageDocumentation
 * @module effectively-once/knex
 */
export { knexLayer, LIBRARY_QUERY_CONTEXT } from './layer.js';
