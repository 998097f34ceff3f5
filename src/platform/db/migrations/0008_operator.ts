// Indexes for the operator's questions: pending invoices past their payment window (the expiry loop looks
// for them every 30 s, so it must not scan every invoice), and the delivery log filtered by outcome,
// plugin or invoice, each newest first within a store as the list pages them.
import { sql, type Kysely } from "kysely";
import type { MigrationContext } from "./context.ts";

const DELIVERY_INDEXES: { name: string; column: string }[] = [
  { name: "deliveries_store_outcome", column: "outcome" },
  { name: "deliveries_store_plugin", column: "plugin_name" },
  { name: "deliveries_store_invoice", column: "invoice_id" },
];

export async function up(db: Kysely<unknown>, ctx: MigrationContext): Promise<void> {
  // Partial: only pending invoices are in it, so it stays small however many invoices a store has.
  await sql`create index if not exists invoices_pending_created on invoices (created_at) where status = 'pending'`.execute(db);
  for (const index of DELIVERY_INDEXES) {
    await db.schema.createIndex(index.name).ifNotExists().on("deliveries").columns(["store_id", index.column, "created_at desc", "id desc"]).execute();
  }
  if (ctx.dialect === "sqlite") {
    await sql`pragma analysis_limit = 1000`.execute(db);
    await sql`analyze invoices_pending_created`.execute(db);
    for (const index of DELIVERY_INDEXES) await sql`analyze ${sql.id(index.name)}`.execute(db);
  }
}
