// The read model: every customer and every invoice stored as the JSON the list operations send, so a page
// is one indexed query and a string join instead of ~1,100 scattered child rows and a serialization.
// Writers refresh the documents in their own transaction (src/readmodel/documents.ts). Triggers on every
// source table delete a document the moment a write makes it stale, in the same transaction, so a writer
// that does not refresh (a bulk tool, a raw UPDATE, code added later) leaves a missing document, which
// the read path assembles from the source tables: never a stale one. Also the indexes of the `status`
// and `email` filters. See docs/decisions/0005-reads-off-the-money-path.md.
import { sql, type Kysely } from "kysely";
import type { MigrationContext } from "./context.ts";

/**
 * PostgreSQL: how a row of each source table names its customer (`r` is old or new). The triggers lock
 * that customer before deleting its documents, as the refresh does before rebuilding them: every lock on
 * a document is then taken under its customer's lock, in one order, so concurrent writers of one
 * customer (fifty deliveries of one event appending their log lines) queue instead of deadlocking.
 */
export const CUSTOMER_OF: Record<string, (r: string) => string> = {
  customers: (r) => `${r}.id`,
  customer_discord_accounts: (r) => `${r}.customer_id`,
  reviews: (r) => `${r}.customer_id`,
  customer_sessions: (r) => `${r}.customer_id`,
  invoices: (r) => `${r}.customer_id`,
  invoice_items: (r) => `${r}.customer_id`,
  invoice_fields: (r) => `(select customer_id from invoices where id = ${r}.invoice_id)`,
  invoice_logs: (r) => `(select customer_id from invoices where id = ${r}.invoice_id)`,
};

/** Source table → the documents a row of it belongs to: [view table, the row's column naming the document]. */
export const STALE_RULES: Record<string, [view: "customer_views" | "invoice_views", column: string][]> = {
  customers: [["customer_views", "id"]],
  customer_discord_accounts: [["customer_views", "customer_id"]],
  reviews: [["customer_views", "customer_id"]],
  customer_sessions: [["customer_views", "customer_id"]],
  // A customer's document lists its invoices and derives its order figures from them.
  invoices: [
    ["invoice_views", "id"],
    ["customer_views", "customer_id"],
  ],
  invoice_items: [["invoice_views", "invoice_id"]],
  invoice_fields: [["invoice_views", "invoice_id"]],
  invoice_logs: [["invoice_views", "invoice_id"]],
};

export async function up(db: Kysely<unknown>, ctx: MigrationContext): Promise<void> {
  for (const table of ["customer_views", "invoice_views"]) {
    await db.schema
      .createTable(table)
      .addColumn("id", "text", (c) => c.primaryKey())
      .addColumn("store_id", "text", (c) => c.notNull())
      .addColumn("body", "text", (c) => c.notNull())
      .execute();
  }

  // Filters. Invoices by status: one ordered range per status. Customers by status: for each customer in
  // page order, one probe of (customer_id, status). Customers by e-mail: ASCII case folding on both
  // dialects (PostgreSQL's lower() under the "C" collation folds ASCII only, like SQLite's).
  await db.schema.createIndex("invoices_status_page").on("invoices").columns(["store_id", "status", "created_at desc", "id desc"]).execute();
  await db.schema.createIndex("invoices_customer_status").on("invoices").columns(["customer_id", "status"]).execute();
  const folded = ctx.dialect === "postgres" ? sql`lower(email collate "C")` : sql`lower(email)`;
  await sql`create index customers_email on customers (store_id, ${folded}, created_at desc, id desc)`.execute(db);

  for (const table of Object.keys(STALE_RULES)) await createStaleTriggers(db, ctx.dialect, table);

  // Existing data gets its documents in migration 0015, which rebuilt these tables (the code that writes
  // documents today writes its columns, not these).
  if (ctx.dialect === "sqlite") {
    await sql`pragma analysis_limit = 1000`.execute(db);
    for (const index of ["invoices_status_page", "invoices_customer_status", "customers_email"]) await sql`analyze ${sql.id(index)}`.execute(db);
  }
}

/** The triggers that delete a source table's stale documents (also used by later migrations that rebuild them). */
export async function createStaleTriggers(db: Kysely<unknown>, dialect: "sqlite" | "postgres", table: string): Promise<void> {
  const rules = STALE_RULES[table]!;
  if (dialect === "sqlite") {
    for (const event of ["insert", "update", "delete"] as const) {
      const rows = event === "insert" ? ["new"] : event === "delete" ? ["old"] : ["old", "new"];
      const body = rules.flatMap(([view, column]) => rows.map((r) => `delete from ${view} where id = ${r}.${column};`)).join(" ");
      await sql.raw(`create trigger ${table}_stale_${event} after ${event} on ${table} for each row begin ${body} end`).execute(db);
    }
    return;
  }
  const deletes = (r: string) =>
    `perform 1 from customers where id = ${CUSTOMER_OF[table]!(r)} for no key update; ` +
    rules.map(([view, column]) => `delete from ${view} where id = ${r}.${column};`).join(" ");
  await sql
    .raw(
      `create function ${table}_stale() returns trigger language plpgsql as $$ begin ` +
        `if tg_op <> 'INSERT' then ${deletes("old")} end if; ` +
        `if tg_op <> 'DELETE' then ${deletes("new")} end if; ` +
        `return null; end $$`,
    )
    .execute(db);
  await sql.raw(`create trigger ${table}_stale after insert or update or delete on ${table} for each row execute function ${table}_stale()`).execute(db);
}
