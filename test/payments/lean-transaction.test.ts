// The payment's transaction holds the money path only, so payments of one store, and of one customer, do
// not wait on each other beyond the invoice they touch; and what the transaction leaves out (the read
// model's documents, the feed's numbers) is still never seen stale: a list or feed read right after the
// 200 shows the payment.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { sql } from "kysely";
import { applyPayment, RetryPayment } from "../../src/payments/payment.apply.ts";
import { DIALECTS, createHarness, expectStatus, type Harness } from "../helpers/harness.ts";
import { deliverSigned, installPlugin, invoiceView, SIGNED_PLUGIN } from "../helpers/webhook.ts";

async function storeWithInvoices(h: Harness, count: number) {
  const store = await h.store();
  await installPlugin(h, store.id, "pay", SIGNED_PLUGIN);
  const customer = await h.customer(store.id);
  const invoices: string[] = [];
  for (let i = 0; i < count; i++) {
    invoices.push((await h.checkout(store.id, { customerId: customer.id, paymentMethod: "card", items: [{ productVariantId: "v", quantity: 1, price: 5 }] })).id);
  }
  return { store, customer, invoices };
}

for (const dialect of DIALECTS) {
  describe(`a payment's answer and what follows it on ${dialect.name}`, { skip: dialect.skip }, () => {
    let h: Harness;
    before(async () => {
      h = await createHarness(dialect.name, { WEBHOOK_RATE_LIMIT_MAX: "100000", RATE_LIMIT_MAX: "100000" });
    });
    after(async () => {
      await h?.close();
    });

    test("right after each 200 of 24 concurrent payments of one customer, the lists show the invoice completed with its lines", async () => {
      const { store, customer, invoices } = await storeWithInvoices(h, 24);
      // Documents built, so that a stale one would be there to be served.
      await h.services.projector.drain();
      await Promise.all(
        invoices.map(async (id) => {
          const r = await deliverSigned(h, store.id, { type: "paid", invoiceId: id });
          expectStatus(r, 200);
          const view = await invoiceView(h, store.key, id);
          assert.equal(view.status, "completed");
          assert.ok(view.invoiceLogs.some((l) => l.log.startsWith("Payment confirmed")), "the transition's line is listed");
        }),
      );
      const page = await h.get(`/api/service/customers?id=${customer.id}`, store.key);
      expectStatus(page, 200);
      const listed = page.json<{ data: { customers: { totalOrders: number; invoices: { status: string }[] }[] } }>().data.customers[0]!;
      assert.equal(listed.totalOrders, 24);
      assert.deepEqual([...new Set(listed.invoices.map((i) => i.status))], ["completed"]);
    });

    test("a payment's log lines are written whatever their number: each in order, then the transition's", async () => {
      const store = await h.store();
      const logging = SIGNED_PLUGIN.replace('local e = request.json', 'local e = request.json\nfor i = 1, (e.lines or 0) do log("step " .. i, "info") end');
      await installPlugin(h, store.id, "pay", logging);
      const customer = await h.customer(store.id);
      // One line (the transition's alone), a few, and more than the statements kept per number of lines.
      for (const lines of [0, 2, 15, 40]) {
        const invoice = await h.checkout(store.id, { customerId: customer.id, paymentMethod: "card", items: [{ productVariantId: "v", quantity: 1, price: 5 }] });
        expectStatus(await deliverSigned(h, store.id, { type: "paid", invoiceId: invoice.id, lines }), 200);
        const logs = (await invoiceView(h, store.key, invoice.id)).invoiceLogs.map((l) => l.log);
        const steps = Array.from({ length: lines }, (_, i) => `step ${i + 1}`);
        assert.deepEqual(logs.slice(-(lines + 2)).slice(0, -1), [...steps, `received paid for ${invoice.id}`], `${lines} lines`);
        assert.match(logs.at(-1)!, /^Payment confirmed by plugin pay/);
      }
    });

    test("the feed read right after a payment's 200 has its invoice.completed event", async () => {
      const { store, invoices } = await storeWithInvoices(h, 1);
      expectStatus(await deliverSigned(h, store.id, { type: "paid", invoiceId: invoices[0]! }), 200);
      const feed = await h.get("/api/service/events?limit=10", store.key);
      expectStatus(feed, 200);
      assert.deepEqual(
        feed.json<{ data: { events: { type: string }[] } }>().data.events.map((e) => e.type),
        ["invoice.created", "invoice.completed"],
      );
    });

    test("the projector brings every document up to date: afterwards the stored documents are the assembled ones and nothing waits", async () => {
      const { store, customer, invoices } = await storeWithInvoices(h, 6);
      for (const id of invoices.slice(0, 3)) expectStatus(await deliverSigned(h, store.id, { type: "paid", invoiceId: id }), 200);
      assert.ok((await h.services.projector.backlog()).changes > 0, "the payments left documents to rebuild");
      await h.services.projector.drain();
      assert.deepEqual(await h.services.projector.backlog(), { changes: 0, oldestAt: null });
      const db = h.services.db.kysely;
      const stored = await db.selectFrom("customer_views").select("body").where("id", "=", customer.id).executeTakeFirstOrThrow();
      const listed = await h.get(`/api/service/customers?id=${customer.id}`, store.key);
      assert.deepEqual(JSON.parse(stored.body!), listed.json<{ data: { customers: unknown[] } }>().data.customers[0]);
      for (const id of invoices) {
        const doc = await db.selectFrom("invoice_views").select("body").where("id", "=", id).executeTakeFirstOrThrow();
        assert.deepEqual(JSON.parse(doc.body!), await invoiceView(h, store.key, id));
      }
      const metrics = (await h.app.inject({ method: "GET", url: "/metrics" })).body;
      assert.match(metrics, /^storefront_readmodel_backlog 0$/m);
      assert.match(metrics, /^storefront_readmodel_lag_seconds 0$/m);
    });
  });
}

describe("PostgreSQL: payments of one customer do not wait on each other", { skip: DIALECTS[1]!.skip }, () => {
  test("with one payment's transaction open, another payment of the same customer and store is answered 200, blocked by nothing", async () => {
    const h = await createHarness("postgres", { WEBHOOK_RATE_LIMIT_MAX: "100000" });
    let release = () => {};
    const held = new Promise<void>((r) => (release = r));
    try {
      const { store, invoices } = await storeWithInvoices(h, 2);
      await h.services.projector.drain();
      let holder = 0;
      let opened = () => {};
      const isOpen = new Promise<void>((r) => (opened = r));
      // The first payment's transaction, everything written and not committed: its locks are held.
      const first = h.services.committer.run(async (tx) => {
        await applyPayment(
          tx,
          { storeId: store.id, pluginName: "pay", pluginVersion: 1, deliveryId: "dlv_held", invoiceId: invoices[0]!, action: "pushInvoice", eventKey: "id:held", runLines: [] },
          Date.now,
        );
        holder = (await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(tx)).rows[0]!.pid;
        opened();
        await held;
      });
      await isOpen;
      const second = deliverSigned(h, store.id, { type: "paid", invoiceId: invoices[1]! });
      // Either the second payment is answered, or some backend ends up waiting on the held transaction.
      let watching = true;
      const blocked = (async () => {
        while (watching) {
          const r = await h.services.db.pgPool!.query<{ pid: number }>("select pid from pg_stat_activity where $1 = any(pg_blocking_pids(pid))", [holder]);
          if (r.rows.length > 0) return "blocked" as const;
          await new Promise((res) => setTimeout(res, 5));
        }
        return "stopped" as const;
      })();
      const winner = await Promise.race([second.then((r) => r.statusCode), blocked]);
      watching = false;
      await blocked;
      assert.equal(winner, 200, "the second payment was answered while the first one's transaction was open");
      release();
      await first;
    } finally {
      release();
      await h.close();
    }
  });

  test("a payment whose claim is taken by another delivery while it runs (no transaction of its own) leaves nothing of its writes", async () => {
    const h = await createHarness("postgres");
    const other = await h.services.db.pgPool!.connect();
    try {
      const { store, invoices } = await storeWithInvoices(h, 1);
      const invoiceId = invoices[0]!;
      const db = h.services.db.kysely;
      const count = async (table: "invoice_logs" | "events" | "deliveries") =>
        Number((await sql<{ n: string }>`select count(*) as n from ${sql.table(table)} where invoice_id = ${invoiceId}`.execute(db)).rows[0]!.n);
      const before = { logs: await count("invoice_logs"), events: await count("events"), deliveries: await count("deliveries") };
      // Another delivery of the event holds its claim, not yet committed: the payment's read sees it unclaimed.
      await other.query("begin");
      await other.query("insert into applied_events (store_id, plugin_name, event_key, delivery_id, invoice_id, created_at) values ($1, 'pay', 'id:raced', 'dlv_other', $2, 0)", [store.id, invoiceId]);
      const record = () => ({ id: "dlv_raced" }) as never;
      const payment = applyPayment(db, { storeId: store.id, pluginName: "pay", pluginVersion: 1, deliveryId: "dlv_raced", invoiceId, action: "pushInvoice", eventKey: "id:raced", runLines: [{ log: "raced line", type: "info" }] }, Date.now, record).then(
        () => "applied",
        (err: unknown) => err,
      );
      // Its write statement waits on the held claim; then the other delivery commits.
      for (let waited = 0; ; waited++) {
        // Asked on a connection of its own: a transaction sees one snapshot of pg_stat_activity.
        const r = await h.services.db.pgPool!.query("select 1 from pg_stat_activity where wait_event_type = 'Lock' and query like 'with claim as%'");
        if (r.rows.length > 0) break;
        assert.ok(waited < 400, "the payment's write statement never waited on the held claim");
        await new Promise((res) => setTimeout(res, 5));
      }
      await other.query("commit");
      assert.ok((await payment) instanceof RetryPayment, "the payment is to be run again");
      const view = await invoiceView(h, store.key, invoiceId);
      assert.equal(view.status, "pending", "the status did not change");
      assert.deepEqual({ logs: await count("invoice_logs"), events: await count("events"), deliveries: await count("deliveries") }, before, "no log line, event or delivery record stayed");
    } finally {
      other.release();
      await h.close();
    }
  });
});
