// What a stranger can do to a store's payments, and cannot: unsigned floods spend only their own budget
// (per store and address), never the store's verified one; failed API keys and admin tokens are limited
// per address (each kind on its own budget); and what nobody verified is kept only in part, with a
// per-store cap on the delivery log.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { DIALECTS, createHarness, expectStatus, type Harness } from "../helpers/harness.ts";
import { SIGNED_PLUGIN, deliver, deliverSigned, installPlugin, paymentSetup } from "../helpers/webhook.ts";

const from = (h: Harness, ip: string) => ({
  webhook: (storeId: string, plugin: string, body: string) =>
    h.app.inject({ method: "POST", url: `/api/paymentPlugins?pluginName=${plugin}&storeId=${storeId}`, payload: body, headers: { "content-type": "application/json" }, remoteAddress: ip }),
  get: (url: string, key: string) => h.app.inject({ method: "GET", url, headers: { authorization: key }, remoteAddress: ip }),
  admin: (url: string, token: string) => h.app.inject({ method: "GET", url, headers: { authorization: `Bearer ${token}` }, remoteAddress: ip }),
});

for (const dialect of DIALECTS) {
  describe(`strangers on ${dialect.name}`, { skip: dialect.skip }, () => {
    let h: Harness;
    before(async () => {
      h = await createHarness(dialect.name, {
        WEBHOOK_RATE_LIMIT_MAX: "50",
        WEBHOOK_UNVERIFIED_LIMIT_MAX: "10",
        AUTH_FAILURE_LIMIT_MAX: "5",
        DELIVERY_UNVERIFIED_BODY_BYTES: "1024",
      });
    });
    after(async () => {
      await h?.close();
    });

    test("unsigned posts from one address spend that address's budget only: the store's signed delivery still answers 200", async () => {
      const { store, invoice } = await setup(h);
      const stranger = from(h, "203.0.113.7");
      const answers = [];
      for (let i = 0; i < 30; i++) answers.push((await stranger.webhook(store.id, "pay", `{"n":${i}}`)).statusCode);
      assert.equal(answers.filter((s) => s === 401).length, 10, "rejected until the address's budget is spent");
      assert.equal(answers.filter((s) => s === 429).length, 20, "then refused before any run");
      const genuine = await deliverSigned(h, store.id, { type: "paid", invoiceId: invoice.id });
      expectStatus(genuine, 200);
      // Another address of the same stranger's /64 (IPv6) shares the budget.
      const v6 = [from(h, "2001:db8:1:2::1"), from(h, "2001:db8:1:2::ffff")];
      for (let i = 0; i < 10; i++) await v6[0]!.webhook(store.id, "pay", "{}");
      assert.equal((await v6[1]!.webhook(store.id, "pay", "{}")).statusCode, 429);
    });

    test("posts to a missing plugin count as unverified too, and keep only the start of their body", async () => {
      const store = await h.store();
      const stranger = from(h, "198.51.100.9");
      const big = "x".repeat(200_000);
      const r = await stranger.webhook(store.id, "nope", big);
      assert.equal(r.statusCode, 404);
      const row = await h.services.db.kysely.selectFrom("deliveries").select(["body", "body_bytes"]).where("id", "=", String(r.headers["x-delivery-id"])).executeTakeFirstOrThrow();
      assert.equal(Buffer.from(row.body).length, 1024, "kept: DELIVERY_UNVERIFIED_BODY_BYTES");
      assert.equal(Number(row.body_bytes), 200_000, "the size as received is known");
      const replay = await h.admin("POST", `/api/admin/stores/${store.id}/deliveries/${String(r.headers["x-delivery-id"])}/replay`);
      assert.equal(replay.statusCode, 409, "a cut body is never replayed as if whole");
    });

    test("a rejected delivery keeps only the start of its body; a verified one keeps all of it", async () => {
      const { store, invoice } = await setup(h);
      const padded = JSON.stringify({ type: "ignored", invoiceId: invoice.id, pad: "p".repeat(5000) });
      const rejected = await deliver(h, store.id, "pay", padded, { "x-signature": "0".repeat(64) });
      assert.equal(rejected.statusCode, 401);
      const verified = await deliverSigned(h, store.id, { type: "ignored", pad: "p".repeat(5000) });
      expectStatus(verified, 200);
      const size = async (id: string) =>
        Buffer.from((await h.services.db.kysely.selectFrom("deliveries").select("body").where("id", "=", id).executeTakeFirstOrThrow()).body).length;
      assert.equal(await size(String(rejected.headers["x-delivery-id"])), 1024);
      assert.ok((await size(String(verified.headers["x-delivery-id"]))) > 5000);
    });

    test("failed API keys and admin tokens are limited per address, each kind on its own; other addresses and good keys elsewhere are not", async () => {
      const store = await h.store();
      const guesser = from(h, "192.0.2.44");
      const codes = [];
      for (let i = 0; i < 8; i++) codes.push((await guesser.get("/api/service/customers", `sk_guess_${i}`)).statusCode);
      assert.deepEqual(codes, [401, 401, 401, 401, 401, 429, 429, 429]);
      const tokens = [];
      for (let i = 0; i < 7; i++) tokens.push((await guesser.admin(`/api/admin/stores/${store.id}/plugins`, `wrong-${i}`)).statusCode);
      assert.deepEqual(tokens, [401, 401, 401, 401, 401, 429, 429], "the admin token has its own budget (test/auth-limits.test.ts)");
      const blocked = await guesser.admin(`/api/admin/stores/${store.id}/plugins`, "wrong");
      assert.ok(Number(blocked.headers["retry-after"]) > 0);
      expectStatus(await from(h, "192.0.2.45").get("/api/service/customers", store.key), 200);
    });
  });
}

describe("the per-store cap on the delivery log", () => {
  test("pruning cuts each store's oldest deliveries past DELIVERY_STORE_MAX_MB, and no other store's", async () => {
    const h = await createHarness("sqlite", { DELIVERY_STORE_MAX_MB: "1", WEBHOOK_RATE_LIMIT_MAX: "100000" });
    try {
      const a = await paymentSetup(h);
      const b = await paymentSetup(h);
      const body = (i: number) => JSON.stringify({ type: "noise", i, pad: "z".repeat(200_000) });
      for (let i = 0; i < 8; i++) {
        h.clock.advance(1000);
        expectStatus(await deliverSigned(h, a.store.id, JSON.parse(body(i)) as Record<string, unknown>), 200);
      }
      expectStatus(await deliverSigned(h, b.store.id, { type: "noise" }), 200);
      const deleted = await h.services.webhooks.pruneDeliveries();
      assert.equal(deleted, 3, "8 x ~200 KB: the 3 oldest go to fit 1 MiB");
      const left = await h.services.db.kysely.selectFrom("deliveries").select(["store_id", "body"]).execute();
      assert.equal(left.filter((r) => r.store_id === a.store.id).length, 5);
      assert.equal(left.filter((r) => r.store_id === b.store.id).length, 1);
    } finally {
      await h.close();
    }
  });
});

async function setup(h: Harness) {
  const store = await h.store();
  await installPlugin(h, store.id, "pay", SIGNED_PLUGIN);
  const customer = await h.customer(store.id);
  const invoice = await h.checkout(store.id, { customerId: customer.id, paymentMethod: "card", items: [{ productVariantId: "v", quantity: 1, price: 1 }] });
  return { store, invoice };
}
