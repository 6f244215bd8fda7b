/**
 * `effectively-once/typeorm`: the claim's transaction opened by TypeORM 1.x
 * (`dataSource.transaction`, postgres driver), so a door's handler gets that
 * transaction's `EntityManager` as `ctx.tx`. `typeorm` is an optional peer dependency,
 * imported for its types only.
 * @packageDocumentation
 * @module effectively-once/typeorm
 */
export { typeormLayer } from './layer.js';
