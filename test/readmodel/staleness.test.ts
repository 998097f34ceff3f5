// The database's triggers mark exactly the documents the read model's list of staleness rules names
// (src/readmodel/staleness.ts): for each source table, a write to one of its rows marks the documents its
// columns name, and nothing else.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { sql } from "kysely";
import { createProjector, passBatch, QUIET_MS } from "../../src/readmodel/projector.ts";
import { applyBatch, type BatchBuilder, buildBatch } from "../../src/readmodel/projector.sqlite.ts";
import { STALENESS_RULES } from "../../src/readmodel/staleness.ts";
import { DIALECTS, createHarness, type Harness } from "../helpers/harness.ts";
import { watchBuilds } from "../helpers/projector-builds.ts";

for (const dialect of DIALECTS) {
  describe(`staleness triggers on ${dialect.name}`, { skip: dialect.skip }, () => {
    let h: Harness;
    before(async () => {
      h = await createHarness(dialect.name);
      const store = await h.store();
      const customer = await h.customer(store.id, { discordId: "d-1" });
      await h.checkout(store.id, { customerId: customer.id, paymentMethod: "card", items: [{ productVariantId: "v", quantity: 1, price: 5 }], fields: [{ key: "k", value: "v", type: "text" }] });
      const db = h.services.db.kysely;
      await db.insertInto("reviews").values({ id: "rev_1", store_id: store.id, customer_id: customer.id, rating: 5, text: "ok", product_id: "p", created_at: 1, customer_created_at: 1 }).execute();
    });
    after(async () => {
      await h?.close();
    });

    for (const [table, rules] of Object.entries(STALENESS_RULES)) {
      test(`an update of a row of ${table} marks ${rules.map(([views, column]) => `its ${column}'s ${views}`).join(" and ")}`, async () => {
        const db = h.services.db.kysely;
        await h.services.projector.drain();
        const columns = [...new Set(rules.map(([, column]) => column))];
        const { rows } = await sql<Record<string, string>>`select ${sql.join(columns.map((c) => sql.ref(c)))} from ${sql.table(table)} limit 1`.execute(db);
        const row = rows[0];
        assert.ok(row, `a row of ${table} to update`);
        // An update that changes nothing still is a write: the documents it may have changed are marked.
        await sql`update ${sql.table(table)} set ${sql.ref(columns[0]!)} = ${sql.ref(columns[0]!)} where ${sql.ref(columns[0]!)} = ${row[columns[0]!]!}`.execute(db);
        for (const views of ["customer_views", "invoice_views"] as const) {
          const marked = (await db.selectFrom(`stale_${views}`).select("doc_id").distinct().execute()).map((r) => r.doc_id).sort();
          const expected: string[] = [...new Set(rules.filter(([v]) => v === views).map(([, column]) => row[column]!))].sort();
          assert.deepEqual(marked, expected, `${views} marked by a write to ${table}`);
        }
      });
    }

    test("an invoice moved to another customer marks both customers' documents and its own; a status change marks its own and its customer's", async () => {
      const db = h.services.db.kysely;
      const invoice = await db.selectFrom("invoices").select(["id", "store_id", "customer_id"]).executeTakeFirstOrThrow();
      const other = await h.customer(invoice.store_id);
      const marked = async () => {
        const of = async (views: "customer_views" | "invoice_views") => (await db.selectFrom(`stale_${views}`).select("doc_id").distinct().execute()).map((r) => r.doc_id).sort();
        return { customers: await of("customer_views"), invoices: await of("invoice_views") };
      };
      await h.services.projector.drain();
      await db.updateTable("invoices").set({ customer_id: other.id }).where("id", "=", invoice.id).execute();
      assert.deepEqual(await marked(), { customers: [invoice.customer_id, other.id].sort(), invoices: [invoice.id] });
      await h.services.projector.drain();
      await db.updateTable("invoices").set({ status: "paid" }).where("id", "=", invoice.id).execute();
      assert.deepEqual(await marked(), { customers: [other.id], invoices: [invoice.id] });
      await h.services.projector.drain();
      await db.updateTable("invoices").set({ customer_id: invoice.customer_id }).where("id", "=", invoice.id).execute();
    });

    test("a statement that writes many rows marks each of their documents once, and an owner's insert and delete lay down and remove its documents row", async () => {
      const db = h.services.db.kysely;
      const store = await h.store();
      const customer = await h.customer(store.id);
      const buy = () => h.checkout(store.id, { customerId: customer.id, paymentMethod: "card", items: [{ productVariantId: "v", quantity: 1, price: 5 }] });
      const invoices = [(await buy()).id, (await buy()).id, (await buy()).id].sort();
      await h.services.projector.drain();
      const marks = async (views: "customer_views" | "invoice_views") => (await db.selectFrom(`stale_${views}`).select("doc_id").execute()).map((r) => r.doc_id).sort();

      // Three invoices of one customer paid in one statement, with two log lines each: as a group of payments writes them.
      await db.updateTable("invoices").set({ status: "paid" }).where("id", "in", invoices).execute();
      await db.insertInto("invoice_logs").values(invoices.flatMap((id) => [1, 2].map((n) => ({ invoice_id: id, log: `line ${n}`, type: "info", created_at: n })))).execute();
      const once = dialect.name === "postgres";
      assert.deepEqual(await marks("customer_views"), once ? [customer.id] : [customer.id, customer.id, customer.id], "the customer's document");
      assert.deepEqual(await marks("invoice_views"), once ? [...invoices, ...invoices].sort() : invoices.flatMap((id) => [id, id, id]).sort(), "each invoice's: the update's mark and the lines' (PostgreSQL once a statement, SQLite once a row)");
      await h.services.projector.drain();

      // A new customer has its (empty) documents row, in page order, and is marked; a deleted one's row is gone.
      const added = await h.customer(store.id);
      const row = await db.selectFrom("customer_views").select(["store_id", "body"]).where("id", "=", added.id).executeTakeFirst();
      assert.deepEqual(row, { store_id: store.id, body: null });
      assert.deepEqual(await marks("customer_views"), [added.id]);
      await h.services.projector.drain();
      await db.deleteFrom("customers").where("id", "=", added.id).execute();
      assert.equal(await db.selectFrom("customer_views").select("id").where("id", "=", added.id).executeTakeFirst(), undefined);
      assert.deepEqual(await marks("customer_views"), [added.id], "marked: a list that read it assembles it as gone");
      await h.services.projector.drain();
    });

    test("an invoice whose creation time changes moves its documents row in page order, and it and its customer are marked", async () => {
      const db = h.services.db.kysely;
      const store = await h.store();
      const customer = await h.customer(store.id);
      const invoice = await h.checkout(store.id, { customerId: customer.id, paymentMethod: "card", items: [{ productVariantId: "v", quantity: 1, price: 5 }] });
      await h.services.projector.drain();
      await db.updateTable("invoices").set({ created_at: 42 }).where("id", "=", invoice.id).execute();
      const row = await db.selectFrom("invoice_views").select(["created_at"]).where("id", "=", invoice.id).executeTakeFirstOrThrow();
      assert.equal(Number(row.created_at), 42);
      const marked = async (views: "customer_views" | "invoice_views") => (await db.selectFrom(`stale_${views}`).select("doc_id").distinct().execute()).map((r) => r.doc_id);
      assert.deepEqual(await marked("invoice_views"), [invoice.id]);
      assert.deepEqual(await marked("customer_views"), [customer.id]);
      await h.services.projector.drain();
    });
  });
}

for (const dialect of DIALECTS) {
  describe(`the projector on ${dialect.name}`, { skip: dialect.skip }, () => {
    test("rebuilds a document marked 70,000 times (more marks than a statement can have parameters) and clears them", async () => {
      const h = await createHarness(dialect.name);
      try {
        const store = await h.store();
        const customer = await h.customer(store.id);
        const invoice = await h.checkout(store.id, { customerId: customer.id, paymentMethod: "card", items: [{ productVariantId: "v", quantity: 1, price: 5 }] });
        const db = h.services.db.kysely;
        await h.services.projector.drain();
        // 70,000 log lines written in one statement: each marks the invoice's document.
        const lines =
          dialect.name === "postgres"
            ? sql`insert into invoice_logs (invoice_id, log, type, created_at) select ${invoice.id}, 'line ' || n, 'info', n from generate_series(1, 70000) as n`
            : sql`with recursive n(i) as (select 1 union all select i + 1 from n where i < 70000) insert into invoice_logs (invoice_id, log, type, created_at) select ${invoice.id}, 'line ' || i, 'info', i from n`;
        await lines.execute(db);
        const count = async () => Number((await db.selectFrom("stale_invoice_views").select((eb) => eb.fn.countAll<number>().as("n")).executeTakeFirstOrThrow()).n);
        // SQLite's triggers mark once per row; PostgreSQL's once per statement, so the rest are laid down directly.
        if (dialect.name === "postgres") {
          assert.equal(await count(), 1, "one statement, one mark of its document");
          await sql`insert into stale_invoice_views (doc_id, created_at) select ${invoice.id}, n from generate_series(2, 70000) as n`.execute(db);
        }
        assert.equal(await count(), 70000);
        await h.services.projector.drain();
        assert.deepEqual(await h.services.projector.backlog(), { changes: 0, oldestAt: null });
        const doc = await db.selectFrom("invoice_views").select("body").where("id", "=", invoice.id).executeTakeFirstOrThrow();
        assert.equal((JSON.parse(doc.body!) as { invoiceLogs: unknown[] }).invoiceLogs.length, 70001);
      } finally {
        await h.close();
      }
    });
  });
}

describe("the projector and big documents", () => {
  test("a customer's megabyte-class document is rebuilt once per cooldown while small ones follow every pass", async () => {
    const h = await createHarness("sqlite");
    try {
      // Years before the marks' own times: to the projector the writes never stop (QUIET_MS), and each
      // cool-down runs its course.
      let t = 1_000_000;
      const projector = createProjector(h.services.db.kysely, () => t);
      const store = await h.store();
      const buy = (customerId: string) => h.checkout(store.id, { customerId, paymentMethod: "card", items: [{ productVariantId: "v", quantity: 1, price: 5 }] });
      const bigOne = await h.customer(store.id);
      const small = await h.customer(store.id);
      // About 300 invoices make a customer's document over 64 KiB.
      for (let i = 0; i < 300; i++) await buy(bigOne.id);
      await buy(small.id);
      await projector.drain();
      const db = h.services.db.kysely;
      const staleCustomers = async () => (await db.selectFrom("stale_customer_views").select("doc_id").distinct().execute()).map((r) => r.doc_id).sort();
      // A change to each: both marked.
      await buy(bigOne.id);
      await buy(small.id);
      assert.deepEqual(await staleCustomers(), [bigOne.id, small.id].sort());
      t += 1;
      await projector.runOnce();
      assert.deepEqual(await staleCustomers(), [bigOne.id], "the small one rebuilt, the big one left marked (the lists assemble it)");
      t += 60_000;
      await projector.runOnce();
      assert.deepEqual(await staleCustomers(), [], "after its cooldown, the big one too");
    } finally {
      await h.close();
    }
  });

  test("a big document whose rebuild took long waits in proportion to that time, up to 10 s, not only to its size: a slow or busy machine rebuilds it less often", async () => {
    const h = await createHarness("sqlite");
    try {
      // Years before the marks' own times: to the projector the writes never stop (QUIET_MS), and each
      // cool-down runs its course. Building customers takes 100 ms of its clock: a slow machine, or a busy
      // reader thread.
      const clock = { t: 1_000_000, buildMs: 100 };
      const { db, projector, buy, bigOne, stale } = await bigCustomerSlowlyBuilt(h, clock);
      await projector.drain();
      const bytes = Number((await db.selectFrom("customer_views").select(sql<number>`length(body)`.as("n")).where("id", "=", bigOne.id).executeTakeFirstOrThrow()).n);
      assert.ok(bytes >= 64 * 1024 && bytes < 400 * 1000, `a big document whose size alone waits under a second (${bytes} bytes)`);
      await buy(bigOne.id);
      clock.t += 2_000; // past what its size alone asks (under a second)
      await projector.runOnce();
      assert.equal(await stale(), true, "two seconds after a 100 ms rebuild it still waits");
      clock.t += 14_000; // 150 times the rebuild's 100 ms have passed
      clock.buildMs = 1_000; // this rebuild takes a second: 150 times that would be minutes
      await projector.runOnce();
      assert.equal(await stale(), false, "rebuilt once 150 times its rebuild's time have passed");
      await buy(bigOne.id);
      clock.t += 9_000;
      await projector.runOnce();
      assert.equal(await stale(), true, "nine seconds after a rebuild of a second it still waits");
      clock.t += 1_001;
      await projector.runOnce();
      assert.equal(await stale(), false, "but not past 10 s");
    } finally {
      await h.close();
    }
  });

  test("a big document cooling down is rebuilt as soon as the writes stop: no mark for QUIET_MS", async () => {
    const h = await createHarness("sqlite");
    try {
      // The projector's clock is the real one, as the marks' times are, moved by hand. Each customer build
      // takes 100 ms of it: a cool-down of 15 s (150 times it).
      const clock = { t: Date.now(), buildMs: 100 };
      const { projector, buy, bigOne, stale } = await bigCustomerSlowlyBuilt(h, clock);
      clock.t = Date.now();
      await projector.drain(); // built now: its cool-down starts
      await buy(bigOne.id);
      clock.t = Date.now();
      await projector.runOnce();
      assert.equal(await stale(), true, "marked just now: the writes may go on, it waits");
      clock.t = Date.now() + QUIET_MS;
      await projector.runOnce();
      assert.equal(await stale(), false, "nothing marked for QUIET_MS: rebuilt, 15 s before its cool-down's end");
    } finally {
      await h.close();
    }
  });
});

/**
 * A customer of 300 invoices (a document over 64 KiB) in a new store, and a projector on `clock`, whose
 * customer builds each take `clock.buildMs` of it.
 */
async function bigCustomerSlowlyBuilt(h: Harness, clock: { t: number; buildMs: number }) {
  const db = h.services.db.kysely;
  const slowBuild: BatchBuilder = async (requests) => {
    if (requests.some((r) => r.views === "customer_views")) clock.t += clock.buildMs;
    return buildBatch(db, requests);
  };
  const projector = createProjector(db, () => clock.t, () => slowBuild);
  const store = await h.store();
  const buy = (customerId: string) => h.checkout(store.id, { customerId, paymentMethod: "card", items: [{ productVariantId: "v", quantity: 1, price: 5 }] });
  const bigOne = await h.customer(store.id);
  for (let i = 0; i < 300; i++) await buy(bigOne.id);
  const stale = async () => (await db.selectFrom("stale_customer_views").select("doc_id").distinct().execute()).length > 0;
  return { db, projector, buy, bigOne, stale };
}

for (const dialect of DIALECTS) {
  describe(`a projector pass and the size of documents on ${dialect.name}`, { skip: dialect.skip }, () => {
    test("a pass rebuilds a batch of small customers at once (100 on PostgreSQL, 25 on SQLite built on the writer's thread), but big ones only up to about 2 MB by their stored size, in a process that never built them", async () => {
      const h = await createHarness(dialect.name);
      try {
        const store = await h.store();
        const db = h.services.db.kysely;
        const buy = (customerId: string) => h.checkout(store.id, { customerId, paymentMethod: "card", items: [{ productVariantId: "v", quantity: 1, price: 5 }] });
        const staleCustomers = async () => (await db.selectFrom("stale_customer_views").select("doc_id").distinct().execute()).map((r) => r.doc_id);
        const customers = [];
        for (let i = 0; i < 40; i++) customers.push(await h.customer(store.id));
        await h.services.projector.drain();
        for (const c of customers) await buy(c.id);
        assert.equal((await staleCustomers()).length, 40);
        await createProjector(db).runOnce();
        // A projector without a reader thread: on SQLite it builds on the writer's thread.
        const batch = passBatch("customer_views", dialect.name === "sqlite");
        assert.equal((await staleCustomers()).length, Math.max(0, 40 - batch), `${Math.min(40, batch)} of 40 small customers in one pass`);
        await createProjector(db).drain();

        // Three documents stored at 1.2 MB each (as a customer with thousands of invoices has), then changed.
        const big = customers.slice(0, 3).map((c) => c.id);
        await db.updateTable("customer_views").set({ body: JSON.stringify({ padding: "x".repeat(1_200_000) }) }).where("id", "in", big).execute();
        for (const id of big) await buy(id);
        // A projector of another process (nothing remembered of these documents) reads their stored size.
        await createProjector(db).runOnce();
        assert.equal((await staleCustomers()).length, 2, "one 1.2 MB document a pass: two left for the next passes");
      } finally {
        await h.close();
      }
    });
  });
}

/** A SQLite harness with one invoice whose documents are up to date. */
async function withOneInvoice(run: (h: Harness, invoiceId: string) => Promise<void>): Promise<void> {
  const h = await createHarness("sqlite");
  try {
    const store = await h.store();
    const customer = await h.customer(store.id);
    const invoice = await h.checkout(store.id, { customerId: customer.id, paymentMethod: "card", items: [{ productVariantId: "v", quantity: 1, price: 5 }] });
    await h.services.projector.drain();
    await run(h, invoice.id);
  } finally {
    await h.close();
  }
}

const invoiceBody = async (h: Harness, id: string) => (await h.services.db.kysely.selectFrom("invoice_views").select("body").where("id", "=", id).executeTakeFirstOrThrow()).body;

describe("a SQLite projector batch built off the writer's transaction", () => {
  test("a batch whose document another projector wrote after it was built is dropped, and marks made after the build stay", () =>
    withOneInvoice(async (h, id) => {
      const db = h.services.db.kysely;
      const marks = async () => (await db.selectFrom("stale_invoice_views").select("pos").where("doc_id", "=", id).execute()).map((r) => Number(r.pos));

      await db.updateTable("invoices").set({ status: "paid" }).where("id", "=", id).execute();
      const early = (await buildBatch(db, [{ views: "invoice_views", cooling: [], batch: 200 }]))[0]!;
      assert.deepEqual(early.marks.map(([doc]) => doc), [id]);
      assert.match(JSON.stringify(early.bodies), /paid/);

      // Meanwhile the invoice changes again and another projector writes it from the newer sources.
      await db.updateTable("invoices").set({ status: "disputed" }).where("id", "=", id).execute();
      await createProjector(db).drain();
      const fresh = await invoiceBody(h, id);
      assert.match(String(fresh), /disputed/);
      await db.updateTable("invoices").set({ status: "refunded" }).where("id", "=", id).execute();
      const later = await marks();
      assert.ok(later.length > 0);

      assert.equal(await applyBatch(db, [early]), 0, "the older build writes nothing");
      assert.equal(await invoiceBody(h, id), fresh, "the newer document stays");
      assert.deepEqual(await marks(), later, "the marks of the change after the build stay: the document is still stale");
      await h.services.projector.drain();
      assert.match(String(await invoiceBody(h, id)), /refunded/);
    }));

  test("a document whose marks were all gone when its batch was built is not written: another projector owns it", () =>
    withOneInvoice(async (h, id) => {
      const before = await invoiceBody(h, id);
      assert.equal(await applyBatch(h.services.db.kysely, [{ views: "invoice_views", bodies: [[id, '{"old":true}']], marks: [[id, []]], more: false, patched: 0 }]), 0);
      assert.equal(await invoiceBody(h, id), before);
    }));

  test("with nothing stale a pass asks no thread to build (an idle service starts none)", () =>
    withOneInvoice(async (h) => {
      const { built } = watchBuilds(h);
      assert.deepEqual(await h.services.projector.runOnce(), { documents: 0, more: false });
      assert.equal(built.length, 0);
      const store = await h.store();
      await h.customer(store.id);
      await h.services.projector.runOnce();
      assert.ok(built.length > 0, "a change is built on the thread");
    }));

  test("built on a reader thread, a pass takes 100 small customers: a burst of payments for different customers is not cut into passes of 25", async () => {
    const h = await createHarness("sqlite");
    try {
      const { built } = watchBuilds(h);
      const store = await h.store();
      const customers = [];
      for (let i = 0; i < 60; i++) customers.push(await h.customer(store.id));
      await h.services.projector.drain();
      for (const c of customers) await h.checkout(store.id, { customerId: c.id, paymentMethod: "card", items: [{ productVariantId: "v", quantity: 1, price: 5 }] });
      built.length = 0;
      await h.services.projector.runOnce();
      const customerBatch = built.find((b) => b.views === "customer_views");
      assert.equal(customerBatch?.marks.length, 60, "the 60 changed customers in one pass, built on the thread");
      assert.equal(customerBatch?.more, false);
      const left = await h.services.db.kysely.selectFrom("stale_customer_views").select("doc_id").execute();
      assert.deepEqual(left, []);
    } finally {
      await h.close();
    }
  });

  test("the service's projector builds its batches on a thread of its own, and a built batch is written as built", async () => {
    const h = await createHarness("sqlite");
    try {
      const { built } = watchBuilds(h);
      const store = await h.store();
      const customer = await h.customer(store.id);
      const invoice = await h.checkout(store.id, { customerId: customer.id, paymentMethod: "card", items: [{ productVariantId: "v", quantity: 1, price: 5 }] });
      await h.services.projector.drain();
      assert.deepEqual([...new Set(built.map((b) => b.views))].sort(), ["customer_views", "invoice_views"]);
      const fromThread = built.flatMap((b) => b.bodies).find(([doc]) => doc === invoice.id);
      assert.equal(await invoiceBody(h, invoice.id), fromThread?.[1]);
      assert.equal((await h.services.projector.backlog()).changes, 0);
    } finally {
      await h.close();
    }
  });
});
