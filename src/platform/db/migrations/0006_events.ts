// Events out (docs/events.md): the event log (outbox) with a per-store sequence number, outbound webhook
// endpoints, one delivery task per (event, endpoint) claimed by the dispatcher, and every attempt made.
import { sql, type Kysely } from "kysely";
import type { MigrationContext } from "./context.ts";

export async function up(db: Kysely<unknown>, ctx: MigrationContext): Promise<void> {
  const real = ctx.dialect === "postgres" ? sql`double precision` : sql`real`;

  // The last sequence number given out per store. Its row lock, held from the increment to commit, makes
  // a store's events commit in number order (docs/decisions/0004-event-feed-order.md).
  await db.schema
    .createTable("event_sequences")
    .addColumn("store_id", "text", (c) => c.primaryKey())
    .addColumn("last_seq", "bigint", (c) => c.notNull())
    .execute();

  await db.schema
    .createTable("events")
    .addColumn("id", "text", (c) => c.primaryKey())
    .addColumn("store_id", "text", (c) => c.notNull())
    .addColumn("seq", "bigint", (c) => c.notNull())
    .addColumn("type", "text", (c) => c.notNull())
    /** The event's `data`, JSON, as it was when the event was written. */
    .addColumn("data", "text", (c) => c.notNull())
    .addColumn("created_at", "bigint", (c) => c.notNull())
    .addUniqueConstraint("events_store_seq", ["store_id", "seq"])
    .execute();
  await db.schema.createIndex("events_store_type_seq").on("events").columns(["store_id", "type", "seq"]).execute();
  await db.schema.createIndex("events_created").on("events").column("created_at").execute();

  await db.schema
    .createTable("event_endpoints")
    .addColumn("id", "text", (c) => c.primaryKey())
    .addColumn("store_id", "text", (c) => c.notNull().references("stores.id").onDelete("cascade"))
    .addColumn("url", "text", (c) => c.notNull())
    .addColumn("description", "text", (c) => c.notNull().defaultTo(""))
    /** Space-separated event types; "" means every type. */
    .addColumn("types", "text", (c) => c.notNull().defaultTo(""))
    .addColumn("enabled", "integer", (c) => c.notNull())
    .addColumn("disabled_reason", "text")
    /** AES-256-GCM sealed {current, previous?} signing secrets (SECRETS_KEY). */
    .addColumn("secrets", "text", (c) => c.notNull())
    .addColumn("previous_secret_expires_at", "bigint")
    .addColumn("api_version", "text", (c) => c.notNull().defaultTo("2026-11-23"))
    .addColumn("failing_since", "bigint")
    .addColumn("last_success_at", "bigint")
    .addColumn("created_at", "bigint", (c) => c.notNull())
    .addColumn("updated_at", "bigint", (c) => c.notNull())
    .execute();
  await db.schema.createIndex("event_endpoints_store").on("event_endpoints").columns(["store_id", "created_at"]).execute();

  // One row per (event, endpoint) to send, plus one per manual resend. `next_attempt_at` is also the
  // claim: a dispatcher pushes it one lease ahead when it takes the task, so a killed process's task
  // becomes due again when the lease runs out.
  await db.schema
    .createTable("event_deliveries")
    .addColumn("id", "text", (c) => c.primaryKey())
    .addColumn("store_id", "text", (c) => c.notNull())
    .addColumn("event_id", "text", (c) => c.notNull())
    .addColumn("endpoint_id", "text", (c) => c.notNull())
    /** pending | succeeded | failed | cancelled */
    .addColumn("status", "text", (c) => c.notNull())
    .addColumn("attempts", "integer", (c) => c.notNull().defaultTo(0))
    .addColumn("next_attempt_at", "bigint", (c) => c.notNull())
    .addColumn("claim_token", "text")
    .addColumn("manual", "integer", (c) => c.notNull().defaultTo(0))
    .addColumn("created_at", "bigint", (c) => c.notNull())
    .addColumn("updated_at", "bigint", (c) => c.notNull())
    .execute();
  // Only what is still to be sent: finished deliveries leave the index, which stays small and hot.
  await db.schema.createIndex("event_deliveries_due").on("event_deliveries").column("next_attempt_at").where(sql.ref("status"), "=", "pending").execute();
  await db.schema.createIndex("event_deliveries_created").on("event_deliveries").column("created_at").execute();

  await db.schema
    .createTable("event_attempts")
    .addColumn("id", "text", (c) => c.primaryKey())
    .addColumn("store_id", "text", (c) => c.notNull())
    .addColumn("delivery_id", "text", (c) => c.notNull())
    .addColumn("event_id", "text", (c) => c.notNull())
    .addColumn("endpoint_id", "text", (c) => c.notNull())
    .addColumn("attempt", "integer", (c) => c.notNull())
    /** succeeded | failed (will retry) | exhausted | gone (410) */
    .addColumn("outcome", "text", (c) => c.notNull())
    .addColumn("response_status", "integer")
    .addColumn("error", "text")
    .addColumn("response_excerpt", "text", (c) => c.notNull())
    .addColumn("duration_ms", real, (c) => c.notNull())
    .addColumn("created_at", "bigint", (c) => c.notNull())
    .execute();
  await db.schema.createIndex("event_attempts_endpoint").on("event_attempts").columns(["endpoint_id", "created_at desc", "id desc"]).execute();
  await db.schema.createIndex("event_attempts_created").on("event_attempts").column("created_at").execute();
}
