// PostgreSQL: a transaction marks an invoice's document stale once. A payment's statement changes the
// invoice's status and adds its log line, and each of the two writes marked the invoice's document: two
// marks for one rebuild, each inserted, then read, deleted and vacuumed away by the projector (the log
// line's trigger alone cost 18 µs a payment; bench/README.md, nineteenth pass). A checkout (the invoice,
// its items, fields and first log line) marked it four times. The invoice mark triggers now skip a document
// that their own transaction has already marked: that mark commits or rolls back with the write, and no
// projector can read it before it commits, so the document is rebuilt from sources that hold every change
// of the transaction. A mark of another transaction, or of a savepoint of this one (its rows carry the
// savepoint's own transaction id), never stands in for one: its document may be being rebuilt from
// sources read before this transaction's change. The look is bounded (eight of the document's marks).
// Customers' documents are left as they were: no payment marks one twice, and a customer with thousands
// of invoices collects marks while its document's rebuilds are spaced out, each look would walk them.
// Only the trigger functions are replaced, not the triggers. SQLite compiles its trigger bodies into the
// writing statement, and a mark there cannot tell which transaction wrote it: nothing to do there.
import { sql, type Kysely } from "kysely";
import type { MigrationContext } from "./context.ts";
import { MARKING_TABLES, marksFunctionBody } from "./0025_marks_per_statement.ts";

export async function up(db: Kysely<unknown>, ctx: MigrationContext): Promise<void> {
  if (ctx.dialect !== "postgres") return;
  for (const table of MARKING_TABLES) {
    await sql.raw(`create or replace function ${table}_marks() returns trigger language plpgsql as $$ ${marksFunctionBody(table, ["invoice_views"])} $$`).execute(db);
  }
}
