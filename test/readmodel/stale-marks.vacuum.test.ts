// PostgreSQL: the marks tables are a queue (every write inserts marks, the projector deletes them within a
// second), and a deleted row stays in the table and its indexes until a vacuum. Autovacuum visits a database
// once a minute at best, and not at all while its workers are busy with the big tables of an import: the
// bench saw 540,000 dead marks under 200 live ones, the projector's look at the oldest marks and the backlog
// gauge's count taking 50-240 ms each, payments and reads waiting behind them. So the projector vacuums the
// marks tables itself after every 1,000 marks it deletes (during a backlog at most every 10 s: a vacuum reads
// the whole table), and a rebuild (the seed's end) once it is done. A vacuum reads each of the table's
// indexes whole, and an index keeps the size of the largest backlog it ever held (an import's hundreds of
// thousands of marks: 15 MB, 110 ms a vacuum once the queue was small again), so a vacuum that leaves a
// small queue in big indexes rebuilds them.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { type Kysely, sql } from "kysely";
import pg from "pg";
import type { Database } from "../../src/platform/db/schema.ts";
import { rebuildReadModel } from "../../src/readmodel/documents.ts";
import { type IndexRebuildOptions, type IndexesAfterVacuum, vacuumAfterDeletes, vacuumMarks } from "../../src/readmodel/projector.postgres.ts";
import { createHarness, type Harness, pgSkip } from "../helpers/harness.ts";

/** Marks of documents whose owner is gone: the projector only deletes them. */
async function marksOfGoneInvoices(db: Kysely<Database>, count: number, tag: string): Promise<void> {
  await sql`insert into stale_invoice_views (doc_id, created_at) select ${tag} || g, 0 from generate_series(1, ${count}::int) g`.execute(db);
}

/** The bytes of a table's valid indexes. */
async function indexBytes(db: Kysely<Database>, table: string): Promise<number> {
  const { rows } = await sql<{ n: string }>`select coalesce(sum(pg_relation_size(indexrelid)), 0) as n from pg_index where indrelid = to_regclass(${table}) and indisvalid`.execute(db);
  return Number(rows[0]!.n);
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

  test("during a backlog (full passes) a marks table is vacuumed once, then again once the queue is empty", async () => {
    // A projector of its own, that has vacuumed nothing yet (the other tests' one has).
    const own = await createHarness("postgres");
    try {
      const db = own.services.db.kysely;
      await own.services.projector.drain();
      const before = await manualVacuums(db, "stale_invoice_views");
      // 3,000 marks: fifteen full passes of 200, each deleting 200, then an empty one.
      await marksOfGoneInvoices(db, 3_000, "gone-d-");
      await own.services.projector.drain();
      assert.equal(await vacuumedSince(db, "stale_invoice_views", before + 1), true, "vacuumed during the backlog, and once the queue was empty");
      await new Promise((resolve) => setTimeout(resolve, 500));
      assert.equal(await manualVacuums(db, "stale_invoice_views"), before + 2, "twice, not after every 1,000 marks");
    } finally {
      await own.close();
    }
  });

  test("a vacuum that leaves a small queue in the indexes of a big backlog rebuilds them", async () => {
    const db = h.services.db.kysely;
    await h.services.projector.drain();
    await marksOfGoneInvoices(db, 30_000, "gone-big-");
    const grown = await indexBytes(db, "stale_invoice_views");
    assert.ok(grown > 2_000_000, `30,000 marks grew the indexes to ${grown} bytes`);
    await rebuildReadModel(db);
    const rebuilt = await indexBytes(db, "stale_invoice_views");
    assert.ok(rebuilt < 200_000, `the emptied queue's indexes: ${rebuilt} bytes`);
    const { rows } = await sql<{ n: string }>`select count(*) as n from pg_index where indrelid = to_regclass('stale_invoice_views')`.execute(db);
    assert.equal(Number(rows[0]!.n), 2, "the rebuilt indexes replaced the old ones: the position's and the document id's");
  });

  test("a rebuild of the indexes drops the invalid copy a rebuild cut short left", async () => {
    const db = h.services.db.kysely;
    await h.services.projector.drain();
    await marksOfGoneInvoices(db, 30_000, "gone-cut-");
    // A concurrent build that failed (duplicate values for a unique index) leaves its index invalid, as a
    // REINDEX CONCURRENTLY whose connection was lost leaves its copy.
    await assert.rejects(sql`create unique index concurrently stale_invoice_views_doc_ccnew on stale_invoice_views (created_at)`.execute(db));
    const invalid = async () => (await sql<{ n: string }>`select count(*) as n from pg_index where indrelid = to_regclass('stale_invoice_views') and not indisvalid`.execute(db)).rows[0]!.n;
    assert.equal(Number(await invalid()), 1);
    await rebuildReadModel(db);
    assert.equal(Number(await invalid()), 0, "the invalid copy dropped");
    assert.ok((await indexBytes(db, "stale_invoice_views")) < 200_000);
  });

  test("a rebuild that waits for an older transaction is cancelled, and the next one drops its copy", { timeout: 30_000 }, async () => {
    const db = h.services.db.kysely;
    await h.services.projector.drain();
    await marksOfGoneInvoices(db, 30_000, "gone-wait-");
    // A transaction holding a snapshot older than the rebuild (a backup, a long report): REINDEX CONCURRENTLY
    // waits for it to end.
    const older = new pg.Client({ connectionString: h.databaseUrl });
    await older.connect();
    try {
      await older.query("begin isolation level repeatable read");
      await older.query("select 1");
      await sql`delete from stale_invoice_views`.execute(db);
      // Ended after 5 s whatever happens: a rebuild that is never cancelled then completes, and fails the test.
      const release = setTimeout(() => void older.query("commit").catch(() => {}), 5_000);
      const outcome = await vacuumMarks(db, "invoice_views", { timeoutMs: 300 });
      clearTimeout(release);
      assert.equal(outcome, "failed");
      const invalid = async () => Number((await sql<{ n: string }>`select count(*) as n from pg_index where indrelid = to_regclass('stale_invoice_views') and not indisvalid`.execute(db)).rows[0]!.n);
      assert.ok((await invalid()) > 0, "the cancelled rebuild left its copy");
      await older.query("commit");
      assert.equal(await vacuumMarks(db, "invoice_views"), "rebuilt");
      assert.equal(await invalid(), 0, "the copy dropped");
      assert.ok((await indexBytes(db, "stale_invoice_views")) < 200_000);
      const { rows } = await sql<{ statement_timeout: string }>`show statement_timeout`.execute(db);
      assert.equal(rows[0]!.statement_timeout, "0", "the pool's connections keep no timeout");
    } finally {
      await older.end();
    }
  });

  test("the projector's own vacuum after a backlog rebuilds the backlog's indexes", async () => {
    const own = await createHarness("postgres");
    try {
      const db = own.services.db.kysely;
      await own.services.projector.drain();
      await marksOfGoneInvoices(db, 30_000, "gone-big-");
      const grown = await indexBytes(db, "stale_invoice_views");
      await own.services.projector.drain();
      // The vacuum and the rebuild are not awaited by the pass that starts them.
      let rebuilt = grown;
      for (let i = 0; i < 200 && rebuilt >= 200_000; i++) {
        await new Promise((resolve) => setTimeout(resolve, 50));
        rebuilt = await indexBytes(db, "stale_invoice_views");
      }
      assert.ok(rebuilt < 200_000, `indexes of ${grown} bytes after the backlog, ${rebuilt} once it was drained`);
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

describe("the projector's vacuums of the marks tables", () => {
  test("after a failed rebuild of a table's indexes, its vacuums leave them as they are for ten minutes", async () => {
    let clock = 0;
    const calls: { views: string; rebuild: boolean | undefined }[] = [];
    let outcome: IndexesAfterVacuum = "failed";
    const fake = async (_db: unknown, views: string, options: IndexRebuildOptions = {}) => {
      calls.push({ views, rebuild: options.rebuild });
      return options.rebuild === false ? "kept" : outcome;
    };
    const vacuums = vacuumAfterDeletes({} as Kysely<Database>, () => clock, fake);
    const settled = () => new Promise((resolve) => setImmediate(resolve));
    vacuums.deleted("invoice_views", 1_000, false);
    await settled();
    clock += 60_000;
    vacuums.deleted("invoice_views", 1_000, false);
    vacuums.deleted("customer_views", 1_000, false);
    await settled();
    outcome = "rebuilt";
    clock += 9 * 60_000;
    vacuums.deleted("invoice_views", 1_000, false);
    await settled();
    assert.deepEqual(calls, [
      { views: "invoice_views", rebuild: true },
      { views: "invoice_views", rebuild: false },
      { views: "customer_views", rebuild: true },
      { views: "invoice_views", rebuild: true },
    ]);
  });
});
