// The per-customer children (reviews, sessions, invoices) are read newest first with the id as tie
// breaker for a page of customers at once. With (customer_id, created_at) alone the database sorts
// every page's children again (SQLite: a temporary B-tree, about a third of the query); with the whole
// order in the index it reads them in order.
import type { Kysely } from "kysely";
import type { MigrationContext } from "./context.ts";

const CHILDREN = [
  ["reviews", "reviews_customer"],
  ["customer_sessions", "customer_sessions_customer"],
  ["invoices", "invoices_customer"],
] as const;

export async function up(db: Kysely<unknown>, _ctx: MigrationContext): Promise<void> {
  for (const [table, old] of CHILDREN) {
    await db.schema.createIndex(`${table}_customer_order`).on(table).columns(["customer_id", "created_at desc", "id desc"]).execute();
    await db.schema.dropIndex(old).execute();
  }
}
