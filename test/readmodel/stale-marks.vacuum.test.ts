// PostgreSQL: the marks tables are a queue (every write inserts marks, the projector deletes them within a
// second), and a deleted row stays in the table and its indexes until a vacuum. Autovacuum visits a database
// once a minute at best, and not at all while its workers are busy with the big tables of an import: the
// bench saw 540,000 dead marks under 200 live ones, the projector's look at the oldest marks and the backlog
// gauge's count taking 50-240 ms each, payments and reads waiting behind them. So the projector vacuums the
// marks tables itself after every 1,000 marks it deletes (during a backlog at most every 10 s: a vacuum reads
// the whole table), and a rebuild (the seed's end) once it is done.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { type Kysely, sql } from "kysely";
import type { Database } from "../../src/platform/db/schema.ts";
import { rebuildReadModel } from "../../src/readmodel/documents.ts";
import { createHarness, type Harness, pgSkip } from "../helpers/harness.ts";

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

  test("a rebuild of the read model vacuums the marks tables it emptied", async () => {
    const db = h.services.db.kysely;
    const before = await manualVacuums(db, "stale_invoice_views");
    await marksOfGoneInvoices(db, 50, "gone-c-");
    await rebuildReadModel(db);
    assert.equal(await vacuumedSince(db, "stale_invoice_views", before), true);
  });
});
