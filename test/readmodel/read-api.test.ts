// The customer and invoice list operations end to end through the real app, on SQLite and PostgreSQL:
// every field, every filter, paging, every malformed parameter, and the authentication/isolation cases.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { DIALECTS, createHarness, expectStatus, type Harness } from "../helpers/harness.ts";

const ISO_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

interface Fixture {
  a: { id: string; key: string };
  b: { id: string; key: string };
  alice: string;
  bob: string;
  carol: string;
  inv1: Record<string, unknown> & { id: string };
  inv2: Record<string, unknown> & { id: string };
  inv3: Record<string, unknown> & { id: string };
  otherStoreInvoice: string;
  otherStoreCustomer: string;
}

/** Store A: alice (chat account, 2 invoices, one completed, a review), bob (1 completed invoice), carol (none). Store B: one of each. */
async function buildFixture(h: Harness): Promise<Fixture> {
  const { clock } = h;
  clock.set("2023-06-01T10:00:00.000Z");
  const a = await h.store("A");
  const b = await h.store("B");
  clock.set("2023-06-10T12:00:00.000Z");
  const alice = (await h.customer(a.id, { email: "alice@example.com", discordId: "disc-alice", discordEmail: "alice@discord.example" })).id;
  clock.set("2023-06-15T14:30:00.000Z");
  const bob = (await h.customer(a.id, { email: "bob@example.com" })).id;
  clock.set("2023-07-01T00:00:00.000Z");
  const carol = (await h.customer(a.id, { email: "carol@example.com" })).id;

  clock.set("2023-06-20T08:00:00.000Z");
  const inv1 = await h.checkout(a.id, {
    customerId: alice,
    paymentMethod: "stripe",
    displayedPaymentInfo: "visa •••• 4242",
    items: [
      { productVariantId: "var-ebook", quantity: 2, price: 10.5 },
      { productVariantId: "var-course", quantity: 1, price: 99.99, couponId: "coupon-summer" },
    ],
    fields: [{ key: "minecraft_username", value: "alice_mc", type: "text" }],
    discordId: "disc-alice",
    discordEmail: "alice@discord.example",
    session: { ip: "203.0.113.7", userAgent: "Mozilla/5.0", country: "DE" },
  });
  clock.set("2023-06-25T08:00:00.000Z");
  const inv2 = await h.checkout(a.id, { customerId: alice, paymentMethod: "paypal", items: [{ productVariantId: "var-ebook", quantity: 1, price: 10.5 }] });
  clock.set("2023-07-05T09:00:00.000Z");
  const inv3 = await h.checkout(a.id, { customerId: bob, paymentMethod: "crypto", items: [{ productVariantId: "var-key", quantity: 3, price: 5 }] });

  const db = h.services.db.kysely;
  await db.updateTable("invoices").set({ status: "completed" }).where("id", "in", [inv1.id, inv3.id]).execute();
  await db
    .insertInto("reviews")
    .values({ id: "rev_alice1", store_id: a.id, customer_id: alice, rating: 5, text: "Great!", product_id: "prod-ebook", created_at: Date.parse("2023-06-21T00:00:00Z"), customer_created_at: Date.parse("2023-06-10T12:00:00.000Z") })
    .execute();

  clock.set("2023-06-12T00:00:00.000Z");
  const otherCustomer = (await h.customer(b.id, { email: "eve@example.com", discordId: "disc-eve" })).id;
  const otherInvoice = await h.checkout(b.id, { customerId: otherCustomer, paymentMethod: "stripe", items: [{ productVariantId: "var-ebook", quantity: 1, price: 1 }] });

  return { a, b, alice, bob, carol, inv1, inv2, inv3, otherStoreInvoice: otherInvoice.id, otherStoreCustomer: otherCustomer };
}

type Json = Record<string, unknown>;
const ids = (list: Json[]) => list.map((x) => x.id);

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

    const customers = async (query = "", key = f.a.key) => {
      const r = await h.get(`/api/service/customers${query}`, key);
      expectStatus(r, 200);
      return r.json<{ data: { customers: Json[] }; pagination: { limit: number; nextCursor: string | null } }>();
    };
    const invoices = async (query = "", key = f.a.key) => {
      const r = await h.get(`/api/service/invoices${query}`, key);
      expectStatus(r, 200);
      return r.json<{ data: { invoices: Json[] }; pagination: { limit: number; nextCursor: string | null } }>();
    };

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

    for (const [path, param] of [
      ["invoices?status=paid", "status"],
      ["invoices?status=", "status"],
      ["invoices?status=completed,,pending", "status"],
      ["customers?status=Completed", "status"],
      ["invoices?email=alice@example.com", "email"],
      ["customers?email=", "email"],
      // PostgreSQL text cannot hold NUL: such a value matches nothing and must not reach the database.
      ["customers?email=a%00b@example.com", "email"],
      ["invoices?id=inv_%00", "id"],
      ["customers?id=%00", "id"],
      [`invoices?cursor=${Buffer.from(JSON.stringify([1, "inv_\u0000"])).toString("base64url")}`, "cursor"],
    ] as const) {
      test(`${path} is 400 invalid_request naming ${param}`, async () => {
        const r = await h.get(`/api/service/${path}`, f.a.key);
        expectStatus(r, 400);
        const err = r.json<{ error: Json }>().error;
        assert.equal(err.code, "invalid_request");
        assert.equal(err.param, param);
      });
    }

    test("read model: the projector stores the documents after checkout, a raw write marks them stale, and the page is right throughout", async () => {
      const db = h.services.db.kysely;
      const c = await h.store("C");
      const dave = (await h.customer(c.id, { email: "dave@example.com" })).id;
      const inv = await h.checkout(c.id, { customerId: dave, paymentMethod: "stripe", items: [{ productVariantId: "var-d", quantity: 1, price: 3 }] });
      const stored = async () => ({
        customer: (await db.selectFrom("customer_views").select("body").where("id", "=", dave).executeTakeFirst())?.body,
        invoice: (await db.selectFrom("invoice_views").select("body").where("id", "=", inv.id).executeTakeFirst())?.body,
      });
      const marked = async (views: "customer_views" | "invoice_views", id: string) =>
        (await db.selectFrom(`stale_${views}`).select("pos").where("doc_id", "=", id).execute()).length > 0;
      assert.equal((await invoices(`?id=${inv.id}`, c.key)).data.invoices[0]!.id, inv.id, "listed before its document is built (assembled)");
      await h.services.projector.drain();
      const before = await stored();
      assert.ok(before.customer && before.invoice, "the projector wrote both documents after the checkout committed");
      const listed = (await invoices(`?id=${inv.id}`, c.key)).data.invoices[0];
      assert.deepEqual(JSON.parse(before.invoice), listed, "the stored document is the listed invoice");

      await db.updateTable("invoices").set({ status: "completed" }).where("id", "=", inv.id).execute();
      assert.ok(await marked("invoice_views", inv.id), "the trigger marked the invoice's document stale");
      assert.ok(await marked("customer_views", dave), "and its customer's, whose figures depend on it");
      const dave2 = (await customers("?id=" + dave, c.key)).data.customers[0]!;
      assert.equal(dave2.totalOrders, 1, "assembled from the source tables, not the stale document");
      assert.equal((await invoices(`?id=${inv.id}`, c.key)).data.invoices[0]!.status, "completed");
      assert.equal((await invoices("", c.key)).data.invoices[0]!.status, "completed", "an unfiltered page too");
      await h.services.projector.drain();
      assert.equal(JSON.parse((await stored()).invoice!).status, "completed", "rebuilt by the projector");
    });

    test("read model: unfiltered pages follow raw writes that move, re-home or delete an element (the documents' own page order)", async () => {
      const db = h.services.db.kysely;
      const c = await h.store("RM");
      const other = await h.store("RM2");
      const eve = (await h.customer(c.id, { email: "eve@example.com" })).id;
      const finn = (await h.customer(c.id, { email: "finn@example.com" })).id;
      const buy = (customerId: string) => h.checkout(c.id, { customerId, paymentMethod: "stripe", items: [{ productVariantId: "var-rm", quantity: 1, price: 3 }] });
      const eveFirst = (await buy(eve)).id;
      const deleted = (await buy(eve)).id;
      await buy(finn);
      const order = async (list: "customers" | "invoices", key = c.key) => ids(list === "customers" ? (await customers("", key)).data.customers : (await invoices("", key)).data.invoices);
      const before = (await order("invoices")) as string[];
      assert.equal(before.length, 3);
      const kept = before.filter((id) => id !== deleted);
      const [first, last] = [kept[0]!, kept[1]!];

      // The older of the two kept invoices made the newest, the other deleted, without the service's writers.
      await db.updateTable("invoices").set({ created_at: Date.now() + 60_000 }).where("id", "=", last).execute();
      await db.deleteFrom("invoice_items").where("invoice_id", "=", deleted).execute();
      await db.deleteFrom("invoices").where("id", "=", deleted).execute();
      assert.deepEqual(await order("invoices"), [last, first], "moved to the front, the deleted one gone");
      assert.deepEqual(await order("invoices"), ids((await invoices(`?createdAtFrom=2000-01-01`, c.key)).data.invoices), "a date window agrees");

      // A customer moved to another store: listed there, no longer here.
      await db.updateTable("customers").set({ store_id: other.id }).where("id", "=", finn).execute();
      assert.deepEqual(await order("customers"), [eve]);
      assert.deepEqual(await order("customers", other.key), [finn]);
      const eveListed = (await customers("", c.key)).data.customers[0]! as unknown as { invoices: Json[] };
      assert.deepEqual(ids(eveListed.invoices), [eveFirst], "eve's document rebuilt from the source tables without the deleted invoice");
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

    test("both Authorization forms are accepted: raw key and Bearer", async () => {
      expectStatus(await h.get("/api/service/customers", f.a.key), 200);
      expectStatus(await h.get("/api/service/customers", `Bearer ${f.a.key}`), 200);
      expectStatus(await h.get("/api/service/customers", `bearer ${f.a.key}`), 200);
    });

    const badRequests: [string, string][] = [
      ["?createdAtFrom=yesterday", "createdAtFrom"],
      ["?createdAtFrom=2023-13-01", "createdAtFrom"],
      ["?createdAtFrom=2023-02-30", "createdAtFrom"],
      ["?createdAtTo=2023-06-01T25:00:00Z", "createdAtTo"],
      ["?createdAtTo=2023-06-01T10:00:00", "createdAtTo"],
      ["?createdAtFrom=1686787200", "createdAtFrom"],
      ["?createdAtFrom=2023-07-01&createdAtTo=2023-06-01", "createdAtFrom"],
      ["?limit=0", "limit"],
      ["?limit=501", "limit"],
      ["?limit=ten", "limit"],
      ["?limit=1.5", "limit"],
      ["?cursor=not-a-cursor", "cursor"],
      [`?cursor=${Buffer.from('["x","y"]').toString("base64url")}`, "cursor"],
      ["?id=", "id"],
      ["?id=a&id=b", "id"],
      ["?page=2", "page"],
      ["?storeId=other", "storeId"],
    ];
    for (const path of ["customers", "invoices"]) {
      for (const [query, param] of badRequests) {
        test(`${path}${query} is 400 invalid_request naming ${param}`, async () => {
          const r = await h.get(`/api/service/${path}${query}`, f.a.key);
          expectStatus(r, 400);
          const err = r.json<{ error: Json }>().error;
          assert.equal(err.code, "invalid_request");
          assert.equal(err.param, param);
          assert.equal(typeof err.message, "string");
          assert.equal(err.requestId, r.headers["x-request-id"]);
        });
      }
    }

    test("security: no key, unknown key and malformed header are 401 with the error envelope", async () => {
      for (const auth of [null, "sk_unknownkeyunknownkeyunknownkey", "Bearer", "Basic abc def", `Bearer ${f.a.key}x`]) {
        const r = await h.get("/api/service/invoices", auth);
        expectStatus(r, 401);
        assert.equal(r.json<{ error: Json }>().error.code, "unauthorized");
      }
    });

    test("security: authentication comes before validation, so bad parameters without a key are 401", async () => {
      expectStatus(await h.get("/api/service/invoices?limit=0"), 401);
    });

    test("security: a revoked key is refused at once", async () => {
      const created = await h.admin("POST", `/api/admin/stores/${f.a.id}/keys`, {});
      const { id, key } = created.json<{ id: string; key: string }>();
      expectStatus(await h.get("/api/service/invoices", key), 200);
      expectStatus(await h.admin("DELETE", `/api/admin/stores/${f.a.id}/keys/${id}`), 204);
      expectStatus(await h.get("/api/service/invoices", key), 401);
      const list = await h.admin("GET", `/api/admin/stores/${f.a.id}/keys`);
      const listed = list.json<{ data: Json[] }>().data.find((k) => k.id === id)!;
      assert.ok(listed.revokedAt, "listing shows the revocation");
      assert.equal(JSON.stringify(list.json()).includes(key), false, "listing never shows the key");
    });

    test("security: a key without the scope is 403 forbidden", async () => {
      const created = await h.admin("POST", `/api/admin/stores/${f.a.id}/keys`, { scopes: ["invoices:read"] });
      const { key, scopes } = created.json<{ key: string; scopes: string[] }>();
      assert.deepEqual(scopes, ["invoices:read"]);
      expectStatus(await h.get("/api/service/invoices", key), 200);
      const r = await h.get("/api/service/customers", key);
      expectStatus(r, 403);
      assert.equal(r.json<{ error: Json }>().error.code, "forbidden");
    });

    test("security: another store's key sees only its own store, even when asking for this store's ids", async () => {
      assert.deepEqual(ids((await customers("", f.b.key)).data.customers), [f.otherStoreCustomer]);
      assert.deepEqual(ids((await invoices("", f.b.key)).data.invoices), [f.otherStoreInvoice]);
      for (const id of [f.alice, f.inv1.id, "disc-alice", f.inv1.createdOnSessionId as string]) {
        assert.deepEqual((await customers(`?id=${id}`, f.b.key)).data.customers, [], `customers id=${id}`);
        assert.deepEqual((await invoices(`?id=${id}`, f.b.key)).data.invoices, [], `invoices id=${id}`);
      }
      assert.deepEqual((await invoices(`?id=${f.otherStoreInvoice}`)).data.invoices, [], "store A cannot see B's invoice by id");
      assert.deepEqual((await customers(`?id=${f.otherStoreCustomer}`)).data.customers, []);
      assert.deepEqual((await customers("?id=disc-eve")).data.customers, []);
      assert.deepEqual(ids((await customers("?id=var-ebook", f.b.key)).data.customers), [f.otherStoreCustomer], "shared variant ids stay per store");
    });

    test("security: a cursor from another store's page leaks nothing", async () => {
      const page = await invoices("?limit=1", f.a.key);
      const r = await invoices(`?limit=5&cursor=${page.pagination.nextCursor}`, f.b.key);
      for (const inv of r.data.invoices) assert.equal(inv.id, f.otherStoreInvoice);
    });

    test("every response carries x-request-id, an incoming sane one is kept", async () => {
      const r = await h.get("/api/service/invoices", f.a.key, { "x-request-id": "provider-abc-123" });
      assert.equal(r.headers["x-request-id"], "provider-abc-123");
      const bad = await h.get("/nowhere", null, { "x-request-id": "bad id\nwith newline" });
      expectStatus(bad, 404);
      assert.notEqual(bad.headers["x-request-id"], "bad id\nwith newline");
      assert.equal(bad.json<{ error: Json }>().error.code, "not_found");
      assert.equal(bad.json<{ error: Json }>().error.requestId, bad.headers["x-request-id"]);
    });
  });
}
