// The generic `id` filter gathers candidate ids from several tables, then orders them by creation. For a
// value with many matches (a product variant bought thousands of times) every candidate used to cost
// lookups in the table rows: the branch's row for its customer or invoice id, then the customer's or
// invoice's row for its creation time. With the ids in the branch indexes and (id, store, created_at)
// indexes, the candidates and their order come from indexes alone, and only the page's rows are read.
import { sql, type Kysely } from "kysely";
import type { MigrationContext } from "./context.ts";

const INDEXES: { name: string; table: string; columns: string[]; replaces?: string }[] = [
  { name: "customers_id_page", table: "customers", columns: ["id", "store_id", "created_at"] },
  { name: "invoices_id_page", table: "invoices", columns: ["id", "store_id", "created_at"] },
  { name: "invoice_items_variant_ids", table: "invoice_items", columns: ["store_id", "product_variant_id", "customer_id", "invoice_id"], replaces: "invoice_items_variant" },
  { name: "invoice_items_coupon_ids", table: "invoice_items", columns: ["store_id", "coupon_id", "customer_id", "invoice_id"], replaces: "invoice_items_coupon" },
  { name: "reviews_product_customer", table: "reviews", columns: ["store_id", "product_id", "customer_id"], replaces: "reviews_product" },
  {
    name: "customer_discord_accounts_discord_customer",
    table: "customer_discord_accounts",
    columns: ["store_id", "discord_id", "customer_id"],
    replaces: "customer_discord_accounts_discord",
  },
];

export async function up(db: Kysely<unknown>, ctx: MigrationContext): Promise<void> {
  for (const index of INDEXES) {
    await db.schema.createIndex(index.name).ifNotExists().on(index.table).columns(index.columns).execute();
    if (index.replaces) await db.schema.dropIndex(index.replaces).ifExists().execute();
  }
  if (ctx.dialect === "sqlite") {
    // Planner statistics for the new indexes (sampled: quick on large tables too).
    await sql`pragma analysis_limit = 1000`.execute(db);
    for (const index of INDEXES) await sql`analyze ${sql.id(index.name)}`.execute(db);
  }
}
