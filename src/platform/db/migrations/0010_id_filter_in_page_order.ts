// The generic `id` filter in page order (issue 12: 1M customers within 1.3× of 100k, popular ids included).
// Until now a value with many matches (a variant bought thousands of times, a product reviewed thousands
// of times, a popular coupon) gathered every candidate and sorted them to cut one page: its cost grew with
// the store. The rows that can match many times now carry their owner's creation time (it never changes),
// and their indexes are in page order, so a page of matches is a range scan cut at the page size, like an
// unfiltered page. Writers set the columns (checkout, the seed); this migration fills them for existing
// rows with the documents' triggers held off, since the read model does not depend on them.
import { sql, type Kysely } from "kysely";
import type { MigrationContext } from "./context.ts";
import { createStaleTriggers } from "./0009_read_model.ts";

const INDEXES: { name: string; table: string; columns: string[] }[] = [
  { name: "invoice_items_variant_invoices", table: "invoice_items", columns: ["store_id", "product_variant_id", "invoice_created_at desc", "invoice_id desc"] },
  { name: "invoice_items_variant_customers", table: "invoice_items", columns: ["store_id", "product_variant_id", "customer_created_at desc", "customer_id desc"] },
  { name: "invoice_items_coupon_invoices", table: "invoice_items", columns: ["store_id", "coupon_id", "invoice_created_at desc", "invoice_id desc"] },
  { name: "invoice_items_coupon_customers", table: "invoice_items", columns: ["store_id", "coupon_id", "customer_created_at desc", "customer_id desc"] },
  { name: "reviews_product_customers", table: "reviews", columns: ["store_id", "product_id", "customer_created_at desc", "customer_id desc"] },
];
/** The candidate indexes of migration 0004 that these replace (same leading columns). */
const REPLACED = ["invoice_items_variant_ids", "invoice_items_coupon_ids", "reviews_product_customer"];

export async function up(db: Kysely<unknown>, ctx: MigrationContext): Promise<void> {
  await db.schema.alterTable("invoice_items").addColumn("invoice_created_at", "bigint", (c) => c.notNull().defaultTo(0)).execute();
  await db.schema.alterTable("invoice_items").addColumn("customer_created_at", "bigint", (c) => c.notNull().defaultTo(0)).execute();
  await db.schema.alterTable("reviews").addColumn("customer_created_at", "bigint", (c) => c.notNull().defaultTo(0)).execute();

  // The read model's triggers would delete every document on these updates; nothing they watch changes.
  if (ctx.dialect === "sqlite") {
    for (const table of ["invoice_items", "reviews"]) await sql.raw(`drop trigger ${table}_stale_update`).execute(db);
    await sql`update invoice_items set invoice_created_at = (select i.created_at from invoices i where i.id = invoice_items.invoice_id),
                customer_created_at = (select c.created_at from customers c where c.id = invoice_items.customer_id)`.execute(db);
    await sql`update reviews set customer_created_at = (select c.created_at from customers c where c.id = reviews.customer_id)`.execute(db);
    for (const table of ["invoice_items", "reviews"]) {
      for (const event of ["insert", "delete"]) await sql.raw(`drop trigger ${table}_stale_${event}`).execute(db);
      await createStaleTriggers(db, "sqlite", table);
    }
  } else {
    for (const table of ["invoice_items", "reviews"]) await sql.raw(`alter table ${table} disable trigger ${table}_stale`).execute(db);
    await sql`update invoice_items t set invoice_created_at = i.created_at, customer_created_at = c.created_at
              from invoices i, customers c where i.id = t.invoice_id and c.id = t.customer_id`.execute(db);
    await sql`update reviews r set customer_created_at = c.created_at from customers c where c.id = r.customer_id`.execute(db);
    for (const table of ["invoice_items", "reviews"]) await sql.raw(`alter table ${table} enable trigger ${table}_stale`).execute(db);
  }

  for (const index of INDEXES) await db.schema.createIndex(index.name).on(index.table).columns(index.columns).execute();
  for (const name of REPLACED) await db.schema.dropIndex(name).ifExists().execute();
  if (ctx.dialect === "sqlite") {
    await sql`pragma analysis_limit = 1000`.execute(db);
    for (const index of INDEXES) await sql`analyze ${sql.id(index.name)}`.execute(db);
  }
}
