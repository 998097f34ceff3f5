// Payment plugins: installations per store and name (secrets encrypted, enabled flag), every uploaded
// version kept, and the delivery log of every webhook.
import { sql, type Kysely } from "kysely";
import type { MigrationContext } from "./context.ts";

export async function up(db: Kysely<unknown>, ctx: MigrationContext): Promise<void> {
  const blob = ctx.dialect === "postgres" ? sql`bytea` : sql`blob`;

  await db.schema
    .createTable("plugin_installations")
    .addColumn("id", "text", (c) => c.primaryKey())
    .addColumn("store_id", "text", (c) => c.notNull().references("stores.id").onDelete("cascade"))
    .addColumn("name", "text", (c) => c.notNull())
    .addColumn("enabled", "integer", (c) => c.notNull())
    .addColumn("current_version", "integer", (c) => c.notNull())
    .addColumn("secrets", "text", (c) => c.notNull().defaultTo(""))
    .addColumn("secret_names", "text", (c) => c.notNull().defaultTo(""))
    .addColumn("created_at", "bigint", (c) => c.notNull())
    .addColumn("updated_at", "bigint", (c) => c.notNull())
    .addUniqueConstraint("plugin_installations_store_name", ["store_id", "name"])
    .execute();

  await db.schema
    .createTable("plugin_versions")
    .addColumn("installation_id", "text", (c) => c.notNull().references("plugin_installations.id").onDelete("cascade"))
    .addColumn("version", "integer", (c) => c.notNull())
    .addColumn("source", "text", (c) => c.notNull())
    .addColumn("source_sha256", "text", (c) => c.notNull())
    .addColumn("catalog_name", "text")
    .addColumn("created_at", "bigint", (c) => c.notNull())
    .addPrimaryKeyConstraint("plugin_versions_pk", ["installation_id", "version"])
    .execute();

  await db.schema
    .createTable("deliveries")
    .addColumn("id", "text", (c) => c.primaryKey())
    .addColumn("store_id", "text", (c) => c.notNull())
    .addColumn("plugin_name", "text", (c) => c.notNull())
    .addColumn("plugin_version", "integer")
    .addColumn("replay_of", "text")
    .addColumn("method", "text", (c) => c.notNull())
    .addColumn("headers", "text", (c) => c.notNull())
    .addColumn("query", "text", (c) => c.notNull())
    .addColumn("body", blob, (c) => c.notNull())
    .addColumn("outcome", "text", (c) => c.notNull())
    .addColumn("result", "text")
    .addColumn("error", "text")
    .addColumn("logs", "text", (c) => c.notNull())
    .addColumn("fetches", "text", (c) => c.notNull())
    .addColumn("invoice_id", "text")
    .addColumn("transition", "text")
    .addColumn("duration_ms", ctx.dialect === "postgres" ? sql`double precision` : sql`real`, (c) => c.notNull())
    .addColumn("response_status", "integer", (c) => c.notNull())
    .addColumn("response_body", "text", (c) => c.notNull())
    .addColumn("created_at", "bigint", (c) => c.notNull())
    .execute();
  await db.schema.createIndex("deliveries_store").on("deliveries").columns(["store_id", "created_at desc", "id desc"]).execute();
  await db.schema.createIndex("deliveries_created").on("deliveries").column("created_at").execute();
}
