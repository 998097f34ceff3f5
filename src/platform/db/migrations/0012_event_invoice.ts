// The invoice an event is about, as a column: the console lists a store's events newest first, filtered
// by invoice, and that filter must be served by an index rather than by parsing every event's JSON.
// Events written before this migration get theirs from their data (`{ invoice: { id } }`).
import { sql, type Kysely } from "kysely";
import type { MigrationContext } from "./context.ts";

export async function up(db: Kysely<unknown>, ctx: MigrationContext): Promise<void> {
  await db.schema.alterTable("events").addColumn("invoice_id", "text").execute();
  await backfillEventInvoices(db, ctx);
  await db.schema.createIndex("events_store_invoice_seq").on("events").columns(["store_id", "invoice_id", "seq"]).execute();
}

/** Sets invoice_id of the invoice events written before this migration, from their data. */
export async function backfillEventInvoices(db: Kysely<unknown>, ctx: MigrationContext): Promise<void> {
  const fromData = ctx.dialect === "postgres" ? sql`(data::jsonb -> 'invoice' ->> 'id')` : sql`json_extract(data, '$.invoice.id')`;
  await sql`update events set invoice_id = ${fromData} where type like 'invoice.%' and invoice_id is null`.execute(db);
}
