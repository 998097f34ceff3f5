// PostgreSQL: invoice documents' pages keep room for two new versions, not one. A payment rewrites its invoice's
// document (its status, a log line or two more), and the payments of invoices created together tend to
// arrive together, so the projector rewrites neighbouring documents in one statement, where none of the old
// versions can be pruned yet: a page with room for one new version kept one of them in place, and the others
// moved, each adding an entry to the table's three indexes. In the webhook bench's payments (invoices paid
// one of each customer in turn) 38 % of the invoice documents' rewrites stayed on their page at a fill factor
// of 80 (migration 0026), 61 % at 60 (bench/README.md, thirty-first pass); in a seeded store, the newest
// invoice of each customer rewritten in one pass, 70 % and 96 % (test/readmodel/documents-rewrite.postgres.test.ts).
// Invoice documents are small (~0.5-1.5 KiB): the price is a table about a third larger. Only pages written
// from now on are filled so, as in 0026.
import { sql, type Kysely } from "kysely";
import type { MigrationContext } from "./context.ts";

/** Percent of an invoice documents page filled by inserts, and by rewrites that had to move to another page. */
export const INVOICE_DOCUMENTS_FILLFACTOR = 60;

export async function up(db: Kysely<unknown>, ctx: MigrationContext): Promise<void> {
  if (ctx.dialect !== "postgres") return;
  await sql.raw(`alter table invoice_views set (fillfactor = ${INVOICE_DOCUMENTS_FILLFACTOR})`).execute(db);
}
