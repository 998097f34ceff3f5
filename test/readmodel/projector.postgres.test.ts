// PostgreSQL: a projector pass locks the documents it rebuilds (SKIP LOCKED), so any number of processes may
// run one: a document another projector holds is left to it, marks and all, and a document whose owner is
// gone only loses its marks. A pass costs few round trips whatever its size: picking its batch, BEGIN, the
// locks with the marks, the build's reads, the documents written with their marks deleted, COMMIT.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { sql } from "kysely";
import { createHarness, type Harness, pgSkip } from "../helpers/harness.ts";
import { holdTransaction } from "../helpers/held-transaction.ts";

/** Round trips of a pass that rebuilds invoices and finds no customer stale: picking, BEGIN, locks with marks, four reads, write, COMMIT; the customers' pick. */
const PASS_STATEMENTS_MAX = 10;

describe("PostgreSQL: projectors side by side", { skip: pgSkip }, () => {
  let h: Harness;
  let statements: string[] | null = null;
  before(async () => {
    h = await createHarness("postgres", {}, { onQuery: (text) => statements?.push(text) });
  });
  after(async () => {
    await h?.close();
  });

  const logsOf = async (invoiceId: string) => {
    const doc = await h.services.db.kysely.selectFrom("invoice_views").select("body").where("id", "=", invoiceId).executeTakeFirstOrThrow();
    return (JSON.parse(doc.body!) as { invoiceLogs: { log: string }[] }).invoiceLogs.map((l) => l.log);
  };
  const marksOf = async (docId: string) =>
    Number((await h.services.db.kysely.selectFrom("stale_invoice_views").select((eb) => eb.fn.countAll<number>().as("n")).where("doc_id", "=", docId).executeTakeFirstOrThrow()).n);

  test("a document another projector holds keeps its marks and is left to it; a gone one's marks go; the rest are rebuilt, in few round trips", async () => {
    const db = h.services.db.kysely;
    const store = await h.store();
    const customer = await h.customer(store.id);
    const checkout = () => h.checkout(store.id, { customerId: customer.id, paymentMethod: "card", items: [{ productVariantId: "v", quantity: 1, price: 5 }] });
    const held = await checkout();
    const free = await checkout();
    await h.services.projector.drain();

    // A line on each invoice marks its document; a mark of an invoice that no longer exists.
    for (const invoice of [held, free]) await sql`insert into invoice_logs (invoice_id, log, type, created_at) values (${invoice.id}, 'checked', 'info', 1)`.execute(db);
    await sql`insert into stale_invoice_views (doc_id, created_at) values ('inv_gone', 0)`.execute(db);

    // Another projector is building `held`'s document: it holds the row.
    const other = await holdTransaction(db, (tx) => tx.selectFrom("invoice_views").select("id").where("id", "=", held.id).forUpdate().execute());
    statements = [];
    let sent: string[];
    try {
      await h.services.projector.runOnce();
    } finally {
      sent = statements;
      statements = null;
      other.release();
      await other.done;
    }
    assert.ok((await logsOf(free.id)).includes("checked"), "the free document is rebuilt");
    assert.equal(await marksOf(free.id), 0, "and its marks deleted");
    assert.equal(await marksOf("inv_gone"), 0, "a gone document's marks are deleted");
    assert.ok(!(await logsOf(held.id)).includes("checked"), "the held document is not written by this pass");
    assert.ok((await marksOf(held.id)) > 0, "its marks stay for the pass that can lock it");
    assert.ok(sent.length <= PASS_STATEMENTS_MAX, `${sent.length} statements:\n${sent.join("\n")}`);

    // Once the other projector is done, the next pass rebuilds it.
    await h.services.projector.drain();
    assert.ok((await logsOf(held.id)).includes("checked"));
    assert.equal(await marksOf(held.id), 0);
  });

  test("a pass's rewrites commit without waiting for the disk (a crash loses them with their marks' deletion); the service's other writes wait for it", async () => {
    const db = h.services.db.kysely;
    const store = await h.store();
    const customer = await h.customer(store.id);
    const invoice = await h.checkout(store.id, { customerId: customer.id, paymentMethod: "card", items: [{ productVariantId: "v", quantity: 1, price: 5 }] });
    await h.services.projector.drain();
    // Each rewrite of a document records the setting its transaction commits with.
    await sql`create table commit_settings (setting text not null)`.execute(db);
    await sql`create function record_commit_setting() returns trigger language plpgsql as $$ begin insert into commit_settings values (current_setting('synchronous_commit')); return null; end $$`.execute(db);
    await sql`create trigger record_commit_setting after update on invoice_views for each row execute function record_commit_setting()`.execute(db);
    try {
      await sql`insert into invoice_logs (invoice_id, log, type, created_at) values (${invoice.id}, 'rewritten', 'info', 1)`.execute(db);
      await h.services.projector.drain();
      const { rows } = await sql<{ setting: string }>`select setting from commit_settings`.execute(db);
      assert.deepEqual(rows.map((r) => r.setting), ["off"], "the pass that rewrote the document");
      assert.ok((await logsOf(invoice.id)).includes("rewritten"));
      const { rows: main } = await sql<{ synchronous_commit: string }>`show synchronous_commit`.execute(db);
      assert.equal(main[0]!.synchronous_commit, "on", "the connections of the payments' writes");
    } finally {
      await sql`drop trigger record_commit_setting on invoice_views`.execute(db);
      await sql`drop function record_commit_setting()`.execute(db);
      await sql`drop table commit_settings`.execute(db);
    }
  });

  test("passes of a dozen different sizes send a few statement texts, each prepared once per connection, none a `select *`", async () => {
    const store = await h.store();
    const customer = await h.customer(store.id);
    const invoices = [];
    for (let i = 0; i < 12; i++) invoices.push(await h.checkout(store.id, { customerId: customer.id, paymentMethod: "card", items: [{ productVariantId: "v", quantity: 1, price: 5 }] }));
    await h.services.projector.drain();
    const db = h.services.db.kysely;
    const sent: string[] = [];
    try {
      // Passes of 1, 2, … 12 invoices' documents (and their customer's).
      for (let size = 1; size <= 12; size++) {
        for (const invoice of invoices.slice(0, size)) await sql`insert into invoice_logs (invoice_id, log, type, created_at) values (${invoice.id}, ${`line ${size}`}, 'info', 1)`.execute(db);
        statements = sent;
        await h.services.projector.runOnce();
        statements = null;
      }
    } finally {
      statements = null;
    }
    const texts = new Set(sent.filter((s) => !/^(begin|commit)$/i.test(s)));
    assert.deepEqual([...texts].filter((s) => /select \*/i.test(s)), [], "a `select *` is never prepared");
    // One text per read and per lock, whatever the size; the documents' writes one per power of two (1, 2, 4, 8, 16).
    assert.ok(texts.size <= 20, `${texts.size} texts for passes of twelve sizes:\n${[...texts].join("\n")}`);
    assert.ok((await logsOf(invoices[11]!.id)).includes("line 12"));
  });
});
