// SQLite: a customer's document marked stale by a write to one of its invoices says which invoice. The
// projector rebuilds a customer's document from all its invoices; for a customer with thousands (a document
// of a megabyte) that is ~15-25 ms of reading and serializing for one invoice's new status. With the invoice
// named, a big document whose every mark names an invoice is patched instead: that invoice's entry and the
// order figures (src/readmodel/customer-patch.ts). A mark without one (the customer's own row, a review, a
// session, a chat account) still rebuilds the document whole.
//
// PostgreSQL gets the column, left null: its server builds each document in the statement that writes it
// (documents.postgres.ts), without moving the invoices to this process, and its statement triggers are
// unchanged (migration 0025).
//
// The invoices triggers below are 0017's with the customer's marks naming the invoice; frozen with this
// migration.
import { sql, type Kysely } from "kysely";
import type { MigrationContext } from "./context.ts";

const NOW_MS = "cast(unixepoch('subsec') * 1000 as integer)";
const markInvoice = (r: "new" | "old") => `insert into stale_invoice_views (doc_id, created_at) values (${r}.id, ${NOW_MS});`;
const markCustomer = (r: "new" | "old") => `insert into stale_customer_views (doc_id, created_at, invoice_id) values (${r}.customer_id, ${NOW_MS}, ${r}.id);`;

const TRIGGERS = {
  insert: [
    `insert into invoice_views (id, store_id, created_at, body) values (new.id, new.store_id, new.created_at, null) on conflict (id) do update set store_id = excluded.store_id, created_at = excluded.created_at, body = null;`,
    markInvoice("new"),
    markCustomer("new"),
  ],
  update: [
    `delete from invoice_views where id = old.id and old.id <> new.id;`,
    `insert into invoice_views (id, store_id, created_at, body) select new.id, new.store_id, new.created_at, null where old.id <> new.id or old.store_id <> new.store_id or old.created_at <> new.created_at on conflict (id) do update set store_id = excluded.store_id, created_at = excluded.created_at;`,
    markInvoice("old"),
    markCustomer("old"),
    `insert into stale_invoice_views (doc_id, created_at) select new.id, ${NOW_MS} where new.id <> old.id;`,
    `insert into stale_customer_views (doc_id, created_at, invoice_id) select new.customer_id, ${NOW_MS}, new.id where new.customer_id <> old.customer_id;`,
  ],
  delete: [`delete from invoice_views where id = old.id;`, markInvoice("old"), markCustomer("old")],
};

export async function up(db: Kysely<unknown>, ctx: MigrationContext): Promise<void> {
  await sql`alter table stale_customer_views add column invoice_id text`.execute(db);
  if (ctx.dialect !== "sqlite") return;
  for (const [event, body] of Object.entries(TRIGGERS)) {
    await sql.raw(`drop trigger invoices_marks_${event}`).execute(db);
    await sql.raw(`create trigger invoices_marks_${event} after ${event} on invoices for each row begin ${body.join(" ")} end`).execute(db);
  }
}
