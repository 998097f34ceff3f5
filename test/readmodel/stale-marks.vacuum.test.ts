// PostgreSQL: the marks tables are a queue (every write inserts marks, the projector deletes them within a
// second), and a deleted row stays in the table and its indexes until a vacuum. Autovacuum visits a database
// once a minute at best, and not at all while its workers are busy with the big tables of an import: the
// bench saw 540,000 dead marks under 200 live ones, the projector's look at the oldest marks and the backlog
// gauge's count taking 50-240 ms each, payments and reads waiting behind them. So the projector vacuums the
// marks tables itself after every 1,000 marks it deletes, and a rebuild (the seed's end) once it is done.
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

  test("a rebuild of the read model vacuums the marks tables it emptied", async () => {
    const db = h.services.db.kysely;
    const before = await manualVacuums(db, "stale_invoice_views");
    await marksOfGoneInvoices(db, 50, "gone-c-");
    await rebuildReadModel(db);
    assert.equal(await vacuumedSince(db, "stale_invoice_views", before), true);
  });
});
