// Every payment event a plugin's decision was applied for, per store and plugin name: by the result's
// eventId when the plugin gives one ("id:<eventId>"), else by the SHA-256 of the raw body
// ("sha256:<hex>"). A delivery of an event already here changes nothing, so a re-sent or captured old
// "paid" cannot undo a later dispute. The primary key makes concurrent deliveries of one event race
// safely: the second insert waits for the first and then finds it.
//
// Deliveries also learn the size of their body as received: a body nobody verified (unknown or
// disabled plugin, rejected by the plugin) is kept only in part, and replay must know it was cut.
import type { Kysely } from "kysely";

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable("deliveries").addColumn("body_bytes", "bigint").execute();
  await db.schema
    .createTable("applied_events")
    .addColumn("store_id", "text", (c) => c.notNull().references("stores.id").onDelete("cascade"))
    .addColumn("plugin_name", "text", (c) => c.notNull())
    .addColumn("event_key", "text", (c) => c.notNull())
    .addColumn("delivery_id", "text", (c) => c.notNull())
    .addColumn("invoice_id", "text", (c) => c.notNull())
    .addColumn("created_at", "bigint", (c) => c.notNull())
    .addPrimaryKeyConstraint("applied_events_pk", ["store_id", "plugin_name", "event_key"])
    .execute();
}
