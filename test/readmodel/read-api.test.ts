// The customer and invoice list operations end to end through the real app, on SQLite and PostgreSQL:
// every field, every filter, dates and paging. Malformed parameters are in read-api.bad-requests.test.ts,
// authentication and isolation in read-api.security.test.ts, the stored documents behind the pages in
// read-api.read-model.test.ts.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { DIALECTS, createHarness, type Harness } from "../helpers/harness.ts";
import { buildFixture, customersPage, ids, invoicesPage, type Fixture, type Json } from "../helpers/read-api.ts";

const ISO_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

for (const dialect of DIALECTS) {
  describe(`read API on ${dialect.name}`, { skip: dialect.skip }, () => {
    let h: Harness;
    let f: Fixture;
    before(async () => {
      h = await createHarness(dialect.name);
      f = await buildFixture(h);
    });
    after(async () => {
      await h?.close();
    });

    const customers = (query = "", key = f.a.key) => customersPage(h, query, key);
    const invoices = (query = "", key = f.a.key) => invoicesPage(h, query, key);

    test("customers: every field of spec 2.1-2.4 with derived order figures from completed invoices", async () => {
      const body = await customers();
      assert.deepEqual(body.pagination, { limit: 100, nextCursor: null });
      assert.deepEqual(ids(body.data.customers), [f.carol, f.bob, f.alice], "newest first");
      const alice = body.data.customers.find((c) => c.id === f.alice)!;
      assert.deepEqual(Object.keys(alice).sort(), [
        "createdAt", "customerSessions", "email", "firstOrderDate", "id", "invoices", "lastOrderDate", "reviews",
        "storeCustomerDiscordAccount", "totalOrders", "totalSpent",
      ]);
      assert.equal(alice.email, "alice@example.com");
      assert.equal(alice.createdAt, "2023-06-10T12:00:00.000Z");
      assert.equal(alice.totalOrders, 1, "only the completed invoice counts");
      assert.equal(alice.totalSpent, 120.99);
      assert.equal(alice.firstOrderDate, "2023-06-20T08:00:00.000Z");
      assert.equal(alice.lastOrderDate, "2023-06-20T08:00:00.000Z");
      assert.deepEqual(alice.storeCustomerDiscordAccount, { discordId: "disc-alice", email: "alice@discord.example" });
      assert.deepEqual(alice.reviews, [{ id: "rev_alice1", rating: 5, text: "Great!", productId: "prod-ebook", createdAt: "2023-06-21T00:00:00.000Z" }]);
      const sessions = alice.customerSessions as Json[];
      assert.equal(sessions.length, 2, "each checkout without sessionId records a session");
      assert.deepEqual(sessions.find((s) => s.ip === "203.0.113.7"), {
        ip: "203.0.113.7", userAgent: "Mozilla/5.0", country: "DE", lastUsedAt: "2023-06-20T08:00:00.000Z", createdAt: "2023-06-20T08:00:00.000Z",
      });
      const inv = alice.invoices as Json[];
      assert.deepEqual(ids(inv), [f.inv2.id, f.inv1.id]);
      assert.deepEqual(inv[1], {
        id: f.inv1.id, totalInUsd: 120.99, paymentMethod: "stripe", displayedPaymentInfo: "visa •••• 4242",
        createdOnSessionId: f.inv1.createdOnSessionId, leftFeedback: false, status: "completed", createdAt: "2023-06-20T08:00:00.000Z",
      });
      assert.equal("customerId" in inv[1]!, false, "CustomerInvoice has no customerId");

      const carol = body.data.customers.find((c) => c.id === f.carol)!;
      assert.equal(carol.totalOrders, 0);
      assert.equal(carol.totalSpent, 0);
      assert.equal(carol.firstOrderDate, null);
      assert.equal(carol.lastOrderDate, null);
      assert.equal(carol.storeCustomerDiscordAccount, null);
      assert.deepEqual(carol.reviews, []);
      assert.deepEqual(carol.customerSessions, []);
      assert.deepEqual(carol.invoices, []);
    });

    test("invoices: every field of spec 2.5 with fields, items and logs", async () => {
      const body = await invoices();
      assert.deepEqual(ids(body.data.invoices), [f.inv3.id, f.inv2.id, f.inv1.id]);
      const inv1 = body.data.invoices[2]!;
      assert.deepEqual(inv1, {
        id: f.inv1.id, totalInUsd: 120.99, paymentMethod: "stripe", displayedPaymentInfo: "visa •••• 4242",
        createdOnSessionId: f.inv1.createdOnSessionId, leftFeedback: false, status: "completed", createdAt: "2023-06-20T08:00:00.000Z",
        customerId: f.alice,
        discordAccount: { discordId: "disc-alice", email: "alice@discord.example" },
        invoiceFields: [{ key: "minecraft_username", value: "alice_mc", type: "text" }],
        invoiceItems: [
          { productVariantId: "var-ebook", quantity: 2, price: 10.5, couponId: null },
          { productVariantId: "var-course", quantity: 1, price: 99.99, couponId: "coupon-summer" },
        ],
        invoiceLogs: [{ log: "Invoice created (pending)", type: "info", createdAt: "2023-06-20T08:00:00.000Z" }],
      });
      const inv2 = body.data.invoices[1]!;
      assert.equal(inv2.discordAccount, null);
      assert.deepEqual(inv2.invoiceFields, []);
      for (const inv of body.data.invoices) {
        assert.match(inv.createdAt as string, ISO_MS);
        assert.equal(typeof inv.totalInUsd, "number");
        assert.equal(typeof inv.leftFeedback, "boolean");
      }
    });

    test("customers id filter matches id, discordId, invoice id, review productId, item variant and coupon", async () => {
      const cases: [string, string[]][] = [
        [f.alice, [f.alice]],
        ["disc-alice", [f.alice]],
        [f.inv3.id, [f.bob]],
        ["prod-ebook", [f.alice]],
        ["var-ebook", [f.alice]],
        ["var-key", [f.bob]],
        ["coupon-summer", [f.alice]],
        ["no-such-thing", []],
      ];
      for (const [id, expected] of cases) {
        assert.deepEqual(ids((await customers(`?id=${encodeURIComponent(id)}`)).data.customers), expected, `id=${id}`);
      }
    });

    test("invoices id filter matches id, customerId, createdOnSessionId, discordId, item variant and coupon", async () => {
      const cases: [string, string[]][] = [
        [f.inv1.id, [f.inv1.id]],
        [f.alice, [f.inv2.id, f.inv1.id]],
        [f.inv1.createdOnSessionId as string, [f.inv1.id]],
        ["disc-alice", [f.inv1.id]],
        ["var-ebook", [f.inv2.id, f.inv1.id]],
        ["coupon-summer", [f.inv1.id]],
        ["nothing", []],
      ];
      for (const [id, expected] of cases) {
        assert.deepEqual(ids((await invoices(`?id=${encodeURIComponent(id)}`)).data.invoices), expected, `id=${id}`);
      }
    });

    test("invoices status filter: one status, several comma-separated, paged across them in order", async () => {
      assert.deepEqual(ids((await invoices("?status=completed")).data.invoices), [f.inv3.id, f.inv1.id]);
      assert.deepEqual(ids((await invoices("?status=pending")).data.invoices), [f.inv2.id]);
      assert.deepEqual(ids((await invoices("?status=refunded")).data.invoices), []);
      assert.deepEqual(ids((await invoices("?status=pending,completed")).data.invoices), [f.inv3.id, f.inv2.id, f.inv1.id]);
      assert.deepEqual(ids((await invoices("?status=completed&id=var-ebook")).data.invoices), [f.inv1.id], "with id");
      assert.deepEqual(ids((await invoices("?status=completed&createdAtTo=2023-06-30")).data.invoices), [f.inv1.id], "with a window");
      const seen: unknown[] = [];
      let cursor = "";
      for (let guard = 0; guard < 10; guard++) {
        const page = await invoices(`?status=completed,pending&limit=1${cursor}`);
        seen.push(...ids(page.data.invoices));
        if (page.pagination.nextCursor === null) break;
        cursor = `&cursor=${page.pagination.nextCursor}`;
      }
      assert.deepEqual(seen, [f.inv3.id, f.inv2.id, f.inv1.id], "one per page, newest first");
    });

    test("customers status filter keeps customers with at least one invoice in it; email matches ignoring case", async () => {
      assert.deepEqual(ids((await customers("?status=pending")).data.customers), [f.alice]);
      assert.deepEqual(ids((await customers("?status=completed")).data.customers), [f.bob, f.alice]);
      assert.deepEqual(ids((await customers("?status=refunded,cancelled")).data.customers), []);
      assert.deepEqual(ids((await customers("?email=ALICE@Example.COM")).data.customers), [f.alice]);
      assert.deepEqual(ids((await customers("?email=alice")).data.customers), [], "exact, not a prefix");
      assert.deepEqual(ids((await customers("?email=eve@example.com")).data.customers), [], "another store's customer");
      assert.deepEqual(ids((await customers("?email=bob@example.com&status=pending")).data.customers), [], "both filters apply");
      assert.deepEqual(ids((await customers("?email=alice@example.com&status=pending,completed")).data.customers), [f.alice]);
    });

    test("date bounds are inclusive, accept offsets, and a bare date covers its whole UTC day", async () => {
      assert.deepEqual(ids((await invoices("?createdAtFrom=2023-06-20T08:00:00.000Z&createdAtTo=2023-06-25T08:00:00Z")).data.invoices), [f.inv2.id, f.inv1.id]);
      assert.deepEqual(ids((await invoices("?createdAtFrom=2023-06-20T08:00:00.001Z")).data.invoices), [f.inv3.id, f.inv2.id]);
      assert.deepEqual(ids((await invoices("?createdAtFrom=2023-06-25&createdAtTo=2023-06-25")).data.invoices), [f.inv2.id]);
      assert.deepEqual(ids((await invoices(`?createdAtTo=${encodeURIComponent("2023-06-20T10:00:00+02:00")}`)).data.invoices), [f.inv1.id]);
      assert.deepEqual(ids((await customers("?createdAtFrom=2023-06-15&createdAtTo=2023-06-30")).data.customers), [f.bob]);
      assert.deepEqual((await customers("?createdAtFrom=2030-01-01")).data.customers, [], "no match is an empty list");
    });

    test("paging with limit and cursor walks every element once, in order, to a null nextCursor", async () => {
      const seen: unknown[] = [];
      let cursor: string | null = null;
      let pages = 0;
      do {
        const body = await invoices(`?limit=1${cursor ? `&cursor=${cursor}` : ""}`);
        assert.equal(body.pagination.limit, 1);
        seen.push(...ids(body.data.invoices));
        cursor = body.pagination.nextCursor;
        pages++;
      } while (cursor !== null && pages < 10);
      assert.deepEqual(seen, [f.inv3.id, f.inv2.id, f.inv1.id]);

      const first = await customers("?limit=2");
      assert.deepEqual(ids(first.data.customers), [f.carol, f.bob]);
      assert.ok(first.pagination.nextCursor);
      const second = await customers(`?limit=2&cursor=${first.pagination.nextCursor}`);
      assert.deepEqual(ids(second.data.customers), [f.alice]);
      assert.equal(second.pagination.nextCursor, null);
    });

    test("a page stays stable while newer rows are written", async () => {
      const first = await customers("?limit=1");
      h.clock.set("2030-01-01T00:00:00.000Z");
      const late = await h.customer(f.a.id);
      const second = await customers(`?limit=1&cursor=${first.pagination.nextCursor}`);
      assert.deepEqual(ids(second.data.customers), [f.bob], "the new customer does not shift the next page");
      await h.services.db.kysely.deleteFrom("customers").where("id", "=", late.id).execute();
    });
  });
}
