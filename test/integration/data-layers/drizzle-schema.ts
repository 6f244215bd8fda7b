import { integer, pgTable, text } from 'drizzle-orm/pg-core';

/** The effects table (fixture.ts) as a Drizzle app declares it. */
export const layerEffects = pgTable('layer_effects', {
  id: text('id').primaryKey(),
  door: text('door').notNull(),
  amount: integer('amount').notNull(),
});
