// PostgreSQL: a page whose documents are stale (marked by a write the projector has not caught up with)
// has the server build them in one statement, as the projector does (src/readmodel/documents.postgres.ts),
// and assembles here only what the server could not build. Assembling every stale document here took a
// statement per source table: the slowest reads during a burst of payments (bench/README.md, twenty-third
// pass). The server's text is the JavaScript assembler's byte for byte (documents-sql.postgres.test.ts).
import assert from "node:assert/strict";
import { test } from "node:test";
import { assembleCustomers, customerRows } from "../../src/readmodel/customer-documents.ts";
import { readPage } from "../../src/readmodel/paging.ts";
import { pgSkip } from "../helpers/harness.ts";
import { withSeededStore } from "../helpers/seeded-store.ts";

test("PostgreSQL: a page's stale documents are built by the server, and only the rest assembled here", { skip: pgSkip }, async () => {
  await withSeededStore(async (db, storeId) => {
    const customers = await db.selectFrom("customers").select(["id", "created_at"]).where("store_id", "=", storeId).orderBy("created_at", "desc").orderBy("id", "desc").limit(3).execute();
    const gone = { id: "cus_gone_since_the_page_was_read", created_at: 0 };
    // The page as its statement found it: every document stale (null), one whose customer was deleted since.
    const rows = [...customers, gone].map((c) => ({ id: c.id, created_at: Number(c.created_at), body: null }));
    const source = { kysely: db, dialect: "postgres" as const, prepared: { all: async () => rows } };
    const askedHere: string[][] = [];
    const assembleHere = async (ids: string[]) => {
      askedHere.push(ids);
      const views = await assembleCustomers(db, await customerRows(db, ids));
      return new Map(views.map((v) => [v.id, JSON.stringify(v)]));
    };

    const page = await readPage(source as never, [{ statement: {} as never, params: [] }], 10, "customer_views", assembleHere);

    assert.deepEqual(askedHere, [[gone.id]], "only the document the server did not build is assembled here");
    const assembled = new Map((await assembleCustomers(db, await customerRows(db, customers.map((c) => c.id)))).map((v) => [v.id, JSON.stringify(v)]));
    const expected = customers.map((c) => assembled.get(c.id));
    assert.equal(page.count, 3, "the deleted customer is left out");
    assert.equal(page.elements.filter((e) => e !== ",").join("\n"), expected.join("\n"), "in page order, as JavaScript assembles them");
  });
});
