// PostgreSQL: the marks tables are a queue (every write inserts marks, the projector deletes them within a
// second), and a deleted row stays in the table and its indexes until a vacuum. Autovacuum visits a database
// once a minute at best, and not at all while its workers are busy with the big tables of an import: the
// bench saw 540,000 dead marks under 200 live ones, the projector's look at the oldest marks and the backlog
// gauge's count taking 50-240 ms each, payments and reads waiting behind them. So the projector vacuums the
// marks tables itself after every 1,000 marks it deletes (during a backlog at most every 10 s: a vacuum reads
// the whole table), keeping the table's empty pages (cutting them off locks every writer out), and a rebuild
// (the seed's end) once it is done.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { type Kysely, sql } from "kysely";
import type { Database } from "../../src/platform/db/schema.ts";
import { rebuildReadModel } from "../../src/readmodel/documents.ts";
import { vacuumMarks } from "../../src/readmodel/projector.ts";
import { createHarness, type Harness, pgSkip } from "../helpers/harness.ts";
import { holdTransaction } from "../helpers/held-transaction.ts";

/** Marks of documents whose owner is gone: the projector only deletes them. */
async function marksOfGoneInvoices(db: Kysely<Database>, count: number, tag: string): Promise<void> {
  await sql`insert into stale_invoice_views (doc_id, created_at) select ${tag} || g, 0 from generate_series(1, ${count}::int) g`.execute(db);
}

async function manualVacuums(db: Kysely<Database>, table: string): Promise<number> {
  const { rows } = await sql<{ n: string }>`select vacuum_count as n from pg_stat_user_tables where relid = ${table}::regclass`.execute(db);
  return Number(rows[0]?.n ?? 0);
}

/** Waits (`tries` × 50 ms at most) for the vacuum count to pass `than`: a vacuum started without being awaited. */
async function vacuumedSince(db: Kysely<Database>, table: string, than: number, tries = 100): Promise<boolean> {
  for (let i = 0; i < tries; i++) {
    if ((await manualVacuums(db, table)) > than) return true;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return false;
}

describe("PostgreSQL: the marks tables are vacuumed by the code that empties them", { skip: pgSkip }, () => {
  let h: Harness;
  before(async () => {
    h = await createHarness("postgres");
  });
  after(async () => {
    await h?.close();
  });

  test("the projector vacuums a marks table once it has deleted 1,000 marks from it, not before", async () => {
    const db = h.services.db.kysely;
    await h.services.projector.drain();
    const before = await manualVacuums(db, "stale_invoice_views");
    await marksOfGoneInvoices(db, 600, "gone-a-");
    await h.services.projector.drain();
    assert.equal(await vacuumedSince(db, "stale_invoice_views", before, 20), false, "600 deleted marks: no vacuum yet");
    await marksOfGoneInvoices(db, 600, "gone-b-");
    await h.services.projector.drain();
    assert.equal(await vacuumedSince(db, "stale_invoice_views", before), true, "1,200 deleted marks: vacuumed");
    const { rows } = await sql<{ n: string }>`select count(*) as n from stale_invoice_views`.execute(db);
    assert.equal(Number(rows[0]!.n), 0, "every mark of a gone document deleted");
  });

  test("during a backlog (full passes) a marks table is vacuumed once, then again once the backlog is gone", async () => {
    // A projector of its own, that has vacuumed nothing yet (the other tests' one has).
    const own = await createHarness("postgres");
    try {
      const db = own.services.db.kysely;
      await own.services.projector.drain();
      const before = await manualVacuums(db, "stale_invoice_views");
      // 3,000 marks: fifteen full passes of 200, each deleting 200.
      await marksOfGoneInvoices(db, 3_000, "gone-d-");
      await own.services.projector.drain();
      assert.equal(await vacuumedSince(db, "stale_invoice_views", before), true, "vacuumed during the backlog");
      await new Promise((resolve) => setTimeout(resolve, 500));
      assert.equal(await manualVacuums(db, "stale_invoice_views"), before + 1, "once during the backlog, not after every 1,000 marks");
      // A pass that is not full: the backlog is over, and the 2,000 marks deleted since are vacuumed.
      await marksOfGoneInvoices(db, 100, "gone-e-");
      await own.services.projector.drain();
      assert.equal(await vacuumedSince(db, "stale_invoice_views", before + 1), true, "vacuumed once the backlog was gone");
    } finally {
      await own.close();
    }
  });

  test("the projector's marks vacuum never locks writers out to shorten the table: it keeps its empty pages, and does not wait for writers", async () => {
    // A projector of its own, that has vacuumed nothing yet: its first 1,000 deleted marks start a vacuum.
    const own = await createHarness("postgres");
    try {
      const db = own.services.db.kysely;
      await own.services.projector.drain();
      // A backlog's worth of marks, deleted: the table's pages are all empty, and a vacuum that shrinks the
      // table cuts them off, under an exclusive lock that every payment's marks and every read wait for.
      await marksOfGoneInvoices(db, 5_000, "gone-t-");
      await sql`delete from stale_invoice_views`.execute(db);
      await marksOfGoneInvoices(db, 1_000, "gone-u-");
      const size = async () => Number((await sql<{ n: string }>`select pg_relation_size('stale_invoice_views') as n`.execute(db)).rows[0]!.n);
      const pages = await size();
      assert.ok(pages > 8192, "the marks took pages");

      // A write in flight (a payment that has inserted its marks and not yet committed) holds the table
      // while the projector deletes the last 1,000 marks and starts its vacuum.
      const writer = await holdTransaction(db, (tx) => sql`lock table stale_invoice_views in row exclusive mode`.execute(tx));
      const before = await manualVacuums(db, "stale_invoice_views");
      await own.services.projector.drain();
      const waits = new Set<string>();
      for (let i = 0; i < 200 && (await manualVacuums(db, "stale_invoice_views")) === before; i++) {
        const { rows } = await sql<{ w: string | null }>`select wait_event as w from pg_stat_activity where state = 'active' and query like 'vacuum%stale_invoice_views%' and pid <> pg_backend_pid()`.execute(db);
        for (const r of rows) if (r.w !== null) waits.add(r.w);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      const vacuumedWhileHeld = (await manualVacuums(db, "stale_invoice_views")) > before;
      writer.release();
      await writer.done;
      assert.equal(waits.has("VacuumTruncate"), false, `the vacuum waited for the writer to leave the table: ${[...waits].join(", ")}`);
      assert.ok(vacuumedWhileHeld, "vacuumed while the writer held the table");
      assert.equal(await size(), pages, "the empty pages are kept for the next marks");

      // A rebuild's vacuum, after deletes that can empty hundreds of thousands of pages, shrinks the table.
      await vacuumMarks(db, "invoice_views", { shrink: true });
      assert.ok((await size()) < pages, "shrunk when asked");
    } finally {
      await own.close();
    }
  });

  test("a rebuild of the read model vacuums the marks tables it emptied", async () => {
    const db = h.services.db.kysely;
    const before = await manualVacuums(db, "stale_invoice_views");
    await marksOfGoneInvoices(db, 50, "gone-c-");
    await rebuildReadModel(db);
    assert.equal(await vacuumedSince(db, "stale_invoice_views", before), true);
  });
});
