// PostgreSQL: the read model's documents tables keep room in each page for a document's next version. The
// projector rewrites a document after every change of its sources (a payment rewrites two: its invoice's
// and its customer's), and only the body changes, which no index holds; such an update is heap-only (HOT:
// no index entry, the row stays where its index entries point) only if the new version fits in the page
// the old one is on. With the default fill factor a page is packed full, so most rewrites went to another
// page and added an entry to each of the table's three indexes (its key, its page order, its hash of ids),
// with the pages and the WAL those touch. In the webhook bench's payments 59 % of the invoice documents'
// rewrites and 32 % of the customers' were heap-only; with these fill factors, 89 % and 81 %, and the
// server spent 8-9 % less CPU a payment in a quick run (bench/README.md, eighteenth pass). A customer page keeps
// 30 % (2.4 KiB: the next version of a document of the usual 1.5-2.6 KiB, the old one pruned when the page is
// next read), an invoice page 20 % (invoice documents are ~0.5 KiB). The price is space: the tables take
// about 1.4 and 1.25 times the pages.
//
// Only pages written from now on are filled so: existing documents move to such pages as they are
// rewritten, no table is rewritten here. SQLite has no fill factor: nothing to do there.
import { sql, type Kysely } from "kysely";
import type { MigrationContext } from "./context.ts";

/** Percent of a documents table's page filled by inserts, and by rewrites that had to move to another page. */
export const DOCUMENTS_FILLFACTOR = { customer_views: 70, invoice_views: 80 } as const;

export async function up(db: Kysely<unknown>, ctx: MigrationContext): Promise<void> {
  if (ctx.dialect !== "postgres") return;
  for (const [table, percent] of Object.entries(DOCUMENTS_FILLFACTOR)) await sql.raw(`alter table ${table} set (fillfactor = ${percent})`).execute(db);
}
