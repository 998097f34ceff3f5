// Stores, API keys, customers with their chat account, reviews and sessions; invoices with fields, items
// and logs. Indexes follow the list operations: (store, created_at desc, id desc) for the page order, and
// one per identifier the generic `id` filter matches.
import { sql, type Kysely } from "kysely";
import type { MigrationContext } from "./context.ts";

export async function up(db: Kysely<unknown>, ctx: MigrationContext): Promise<void> {
  await db.schema
    .createTable("stores")
    .addColumn("id", "text", (c) => c.primaryKey())
    .addColumn("name", "text", (c) => c.notNull())
    .addColumn("created_at", "bigint", (c) => c.notNull())
    .execute();

  await db.schema
    .createTable("api_keys")
    .addColumn("id", "text", (c) => c.primaryKey())
    .addColumn("store_id", "text", (c) => c.notNull().references("stores.id").onDelete("cascade"))
    .addColumn("key_hash", "text", (c) => c.notNull().unique())
    .addColumn("key_prefix", "text", (c) => c.notNull())
    .addColumn("name", "text")
    .addColumn("scopes", "text", (c) => c.notNull())
    .addColumn("created_at", "bigint", (c) => c.notNull())
    .addColumn("revoked_at", "bigint")
    .addColumn("last_used_at", "bigint")
    .execute();
  await db.schema.createIndex("api_keys_store").on("api_keys").columns(["store_id", "created_at"]).execute();

  await db.schema
    .createTable("customers")
    .addColumn("id", "text", (c) => c.primaryKey())
    .addColumn("store_id", "text", (c) => c.notNull().references("stores.id").onDelete("cascade"))
    .addColumn("email", "text", (c) => c.notNull())
    .addColumn("created_at", "bigint", (c) => c.notNull())
    .execute();
  await db.schema.createIndex("customers_page").on("customers").columns(["store_id", "created_at desc", "id desc"]).execute();

  await db.schema
    .createTable("customer_discord_accounts")
    .addColumn("customer_id", "text", (c) => c.primaryKey().references("customers.id").onDelete("cascade"))
    .addColumn("store_id", "text", (c) => c.notNull())
    .addColumn("discord_id", "text", (c) => c.notNull())
    .addColumn("email", "text", (c) => c.notNull())
    .execute();
  await db.schema.createIndex("customer_discord_accounts_discord").on("customer_discord_accounts").columns(["store_id", "discord_id"]).execute();

  await db.schema
    .createTable("reviews")
    .addColumn("id", "text", (c) => c.primaryKey())
    .addColumn("store_id", "text", (c) => c.notNull())
    .addColumn("customer_id", "text", (c) => c.notNull().references("customers.id").onDelete("cascade"))
    .addColumn("rating", "integer", (c) => c.notNull())
    .addColumn("text", "text", (c) => c.notNull())
    .addColumn("product_id", "text", (c) => c.notNull())
    .addColumn("created_at", "bigint", (c) => c.notNull())
    .execute();
  await db.schema.createIndex("reviews_customer").on("reviews").columns(["customer_id", "created_at"]).execute();
  await db.schema.createIndex("reviews_product").on("reviews").columns(["store_id", "product_id"]).execute();

  await db.schema
    .createTable("customer_sessions")
    .addColumn("id", "text", (c) => c.primaryKey())
    .addColumn("store_id", "text", (c) => c.notNull())
    .addColumn("customer_id", "text", (c) => c.notNull().references("customers.id").onDelete("cascade"))
    .addColumn("ip", "text", (c) => c.notNull())
    .addColumn("user_agent", "text", (c) => c.notNull())
    .addColumn("country", "text", (c) => c.notNull())
    .addColumn("last_used_at", "bigint", (c) => c.notNull())
    .addColumn("created_at", "bigint", (c) => c.notNull())
    .execute();
  await db.schema.createIndex("customer_sessions_customer").on("customer_sessions").columns(["customer_id", "created_at"]).execute();

  await db.schema
    .createTable("invoices")
    .addColumn("id", "text", (c) => c.primaryKey())
    .addColumn("store_id", "text", (c) => c.notNull().references("stores.id").onDelete("cascade"))
    .addColumn("customer_id", "text", (c) => c.notNull().references("customers.id").onDelete("cascade"))
    .addColumn("total_cents", "bigint", (c) => c.notNull())
    .addColumn("payment_method", "text", (c) => c.notNull())
    .addColumn("displayed_payment_info", "text", (c) => c.notNull())
    .addColumn("created_on_session_id", "text", (c) => c.notNull())
    .addColumn("left_feedback", "integer", (c) => c.notNull().defaultTo(0))
    .addColumn("status", "text", (c) => c.notNull())
    .addColumn("discord_id", "text")
    .addColumn("discord_email", "text")
    .addColumn("created_at", "bigint", (c) => c.notNull())
    .addColumn("updated_at", "bigint", (c) => c.notNull())
    .execute();
  await db.schema.createIndex("invoices_page").on("invoices").columns(["store_id", "created_at desc", "id desc"]).execute();
  await db.schema.createIndex("invoices_customer").on("invoices").columns(["customer_id", "created_at"]).execute();
  await db.schema.createIndex("invoices_session").on("invoices").columns(["store_id", "created_on_session_id"]).execute();
  await db.schema.createIndex("invoices_discord").on("invoices").columns(["store_id", "discord_id"]).execute();

  await db.schema
    .createTable("invoice_fields")
    .addColumn("invoice_id", "text", (c) => c.notNull().references("invoices.id").onDelete("cascade"))
    .addColumn("position", "integer", (c) => c.notNull())
    .addColumn("key", "text", (c) => c.notNull())
    .addColumn("value", "text", (c) => c.notNull())
    .addColumn("type", "text", (c) => c.notNull())
    .addPrimaryKeyConstraint("invoice_fields_pk", ["invoice_id", "position"])
    .execute();

  await db.schema
    .createTable("invoice_items")
    .addColumn("invoice_id", "text", (c) => c.notNull().references("invoices.id").onDelete("cascade"))
    .addColumn("position", "integer", (c) => c.notNull())
    .addColumn("store_id", "text", (c) => c.notNull())
    .addColumn("customer_id", "text", (c) => c.notNull())
    .addColumn("product_variant_id", "text", (c) => c.notNull())
    .addColumn("quantity", "integer", (c) => c.notNull())
    .addColumn("price_cents", "bigint", (c) => c.notNull())
    .addColumn("coupon_id", "text")
    .addPrimaryKeyConstraint("invoice_items_pk", ["invoice_id", "position"])
    .execute();
  await db.schema.createIndex("invoice_items_variant").on("invoice_items").columns(["store_id", "product_variant_id"]).execute();
  await db.schema.createIndex("invoice_items_coupon").on("invoice_items").columns(["store_id", "coupon_id"]).execute();

  await db.schema
    .createTable("invoice_logs")
    .addColumn("id", ctx.dialect === "postgres" ? sql`bigint generated always as identity` : "integer", (c) => c.primaryKey())
    .addColumn("invoice_id", "text", (c) => c.notNull().references("invoices.id").onDelete("cascade"))
    .addColumn("log", "text", (c) => c.notNull())
    .addColumn("type", "text", (c) => c.notNull())
    .addColumn("created_at", "bigint", (c) => c.notNull())
    .execute();
  await db.schema.createIndex("invoice_logs_invoice").on("invoice_logs").columns(["invoice_id", "id"]).execute();
}
