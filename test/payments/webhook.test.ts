// The payment webhook end to end through the real app and the real Lua sandbox, on SQLite and PostgreSQL:
// the merchant's whole loop, every row of the state machine, every response code, duplicates and
// concurrency, raw bytes, secrets, replay and simulation.
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { after, before, describe, test } from "node:test";
import { createPluginsService } from "../../src/plugins/plugins.service.ts";
import { createSecretBox } from "../../src/platform/crypto/secret-box.ts";
import { DIALECTS, createHarness, expectStatus, type Harness } from "../helpers/harness.ts";
import { SIGNED_PLUGIN, TEST_SECRET, deliver, deliverSigned, installPlugin, invoiceView, paymentSetup, sign } from "../helpers/webhook.ts";

type Json = Record<string, unknown>;
const errorOf = (r: { json: <T>() => T }) => r.json<{ error: Json }>().error;

for (const dialect of DIALECTS) {
  describe(`payment webhook on ${dialect.name}`, { skip: dialect.skip }, () => {
    let h: Harness;
    before(async () => {
      h = await createHarness(dialect.name, { PLUGIN_WALL_MS: "1500", PLUGIN_CPU_MS: "200", WEBHOOK_RATE_LIMIT_MAX: "100000" });
    });
    after(async () => {
      await h?.close();
    });

    test("the merchant's loop: checkout, paid webhook completes the invoice with its logs in both lists, then a dispute", async () => {
      const { store, customer, invoice } = await paymentSetup(h, 49.99);
      h.clock.advance(60_000);
      const paid = await deliverSigned(h, store.id, { type: "paid", invoiceId: invoice.id });
      expectStatus(paid, 200);
      assert.deepEqual(paid.json(), { status: "pushInvoice", invoiceId: invoice.id });
      assert.match(String(paid.headers["x-delivery-id"]), /^dlv_/);

      const inv = await invoiceView(h, store.key, invoice.id);
      assert.equal(inv.status, "completed");
      const logs = inv.invoiceLogs.map((l) => l.log);
      assert.equal(logs[0], "Invoice created (pending)");
      assert.ok(logs.includes(`received paid for ${invoice.id}`), "the plugin's log() line is on the invoice");
      assert.ok(logs.some((l) => /^Payment confirmed by plugin pay v1 .*pending -> completed$/.test(l)), "the transition's own line");

      const customers = await h.get(`/api/service/customers?id=${customer.id}`, store.key);
      const c = customers.json<{ data: { customers: Json[] } }>().data.customers[0]!;
      assert.equal(c.totalOrders, 1, "derived figures are right immediately");
      assert.equal(c.totalSpent, 49.99);
      assert.equal((c.invoices as Json[])[0]!.status, "completed");

      const dispute = await deliverSigned(h, store.id, { type: "dispute", invoiceId: invoice.id });
      expectStatus(dispute, 200);
      assert.deepEqual(dispute.json(), { status: "disputeInvoice", invoiceId: invoice.id });
      const disputed = await invoiceView(h, store.key, invoice.id);
      assert.equal(disputed.status, "disputed");
      assert.ok(disputed.invoiceLogs.some((l) => l.type === "warning" && /completed -> disputed$/.test(l.log)));
      const after = await h.get(`/api/service/customers?id=${customer.id}`, store.key);
      assert.equal(after.json<{ data: { customers: Json[] } }>().data.customers[0]!.totalOrders, 0, "a disputed invoice no longer counts");
    });

    const table: [string, "paid" | "dispute", number, string, string?][] = [
      ["pending", "paid", 200, "completed"],
      ["pending", "dispute", 409, "pending"],
      ["expired", "paid", 200, "completed"],
      ["expired", "dispute", 409, "expired"],
      ["completed", "paid", 200, "completed", "already"],
      ["completed", "dispute", 200, "disputed"],
      ["disputed", "paid", 200, "completed"],
      ["disputed", "dispute", 200, "disputed", "already"],
      ["refunded", "paid", 409, "refunded"],
      ["refunded", "dispute", 409, "refunded"],
      ["cancelled", "paid", 409, "cancelled"],
      ["cancelled", "dispute", 409, "cancelled"],
    ];
    for (const [from, event, status, to, already] of table) {
      test(`state machine: ${event} on a ${from} invoice answers ${status} and leaves it ${to}`, async () => {
        const { store, invoice } = await paymentSetup(h);
        await h.services.db.kysely.updateTable("invoices").set({ status: from }).where("id", "=", invoice.id).execute();
        const before = await invoiceView(h, store.key, invoice.id);
        const r = await deliverSigned(h, store.id, { type: event, invoiceId: invoice.id });
        assert.equal(r.statusCode, status, r.body);
        const inv = await invoiceView(h, store.key, invoice.id);
        assert.equal(inv.status, to);
        const transitionLines = inv.invoiceLogs.length - before.invoiceLogs.length - 1; // minus the plugin's own log line
        if (status === 409) {
          const err = errorOf(r);
          assert.equal(err.code, "invalid_transition");
          assert.equal(err.currentStatus, from);
          assert.equal(err.invoiceId, invoice.id);
          assert.equal(transitionLines, 0);
        } else {
          assert.deepEqual(r.json(), { status: event === "paid" ? "pushInvoice" : "disputeInvoice", invoiceId: invoice.id });
          assert.equal(transitionLines, already ? 0 : 1, already ? "already applied writes no transition line" : "one transition line");
        }
      });
    }

    test("50 concurrent identical deliveries change the invoice once and write one transition line; the rest are the same event", async () => {
      const { store, invoice } = await paymentSetup(h);
      const body = JSON.stringify({ type: "paid", invoiceId: invoice.id });
      const answers = await Promise.all(Array.from({ length: 50 }, () => deliver(h, store.id, "pay", body, { "x-signature": sign(body) })));
      for (const a of answers) assert.equal(a.statusCode, 200, a.body);
      const inv = await invoiceView(h, store.key, invoice.id);
      assert.equal(inv.status, "completed");
      assert.equal(inv.invoiceLogs.filter((l) => l.log.startsWith("Payment confirmed")).length, 1);
      const outcomes = await h.services.db.kysely.selectFrom("deliveries").select("outcome").where("invoice_id", "=", invoice.id).execute();
      assert.equal(outcomes.length, 50, "every delivery is recorded");
      assert.equal(outcomes.filter((o) => o.outcome === "applied").length, 1);
      assert.equal(outcomes.filter((o) => o.outcome === "duplicate_event").length, 49, "identical bytes are one event, applied once");
    });

    test("the raw body reaches the script byte for byte, for any content type, non-ASCII included", async () => {
      const store = await h.store();
      await installPlugin(h, store.id, "echo", `
        if request.headers["x-signature"] ~= hmacShaSign(secrets.key, request.body, "sha256") then reject("bad signature") end
        log(string.format("len=%d json=%s ct=%s", #request.body, tostring(request.json ~= nil), tostring(request.headers["content-type"])))
        return { status = "ignore" }`);
      const bodies: [string | Buffer, string | undefined][] = [
        ['{"name":"Jürgen ✓ 日本","amount":12.5}', "application/json"],
        ["amount=12.50&name=J%C3%BCrgen", "application/x-www-form-urlencoded"],
        ["plain text ünïcödé", "text/plain; charset=utf-8"],
        [Buffer.from([0, 255, 1, 128, 10, 13]), "application/octet-stream"],
        ['{"a":1}', undefined],
      ];
      for (const [body, contentType] of bodies) {
        const r = await h.app.inject({
          method: "POST",
          url: `/api/paymentPlugins?pluginName=echo&storeId=${store.id}`,
          headers: { "x-signature": sign(body), ...(contentType ? { "content-type": contentType } : {}) },
          payload: body,
        });
        expectStatus(r, 200);
        const d = await h.admin("GET", `/api/admin/stores/${store.id}/deliveries/${r.headers["x-delivery-id"]}`);
        const delivery = d.json<{ logs: { description: string }[] }>();
        const len = Buffer.byteLength(body);
        assert.match(delivery.logs[0]!.description, new RegExp(`^len=${len} json=${contentType === "application/json" || contentType === undefined ? "true" : "false"}`));
      }
    });

    test("response codes: 400 for a missing or bad query, 404 store_not_found / plugin_not_found (missing or disabled)", async () => {
      const { store } = await paymentSetup(h);
      for (const url of ["/api/paymentPlugins", `/api/paymentPlugins?storeId=${store.id}`, "/api/paymentPlugins?pluginName=pay", `/api/paymentPlugins?pluginName=&storeId=${store.id}`]) {
        const r = await h.app.inject({ method: "POST", url, payload: "{}", headers: { "content-type": "application/json" } });
        expectStatus(r, 400);
        assert.equal(errorOf(r).code, "invalid_request");
      }
      const noStore = await deliverSigned(h, "st_nope", { type: "paid" });
      expectStatus(noStore, 404);
      assert.equal(errorOf(noStore).code, "store_not_found");
      const noPlugin = await deliverSigned(h, store.id, { type: "paid" }, "nothing-here");
      expectStatus(noPlugin, 404);
      assert.equal(errorOf(noPlugin).code, "plugin_not_found");
      assert.ok(noPlugin.headers["x-delivery-id"], "a delivery to a known store is recorded");
      const disable = await h.admin("PUT", `/api/admin/stores/${store.id}/plugins/pay`, { enabled: false });
      expectStatus(disable, 200);
      const disabled = await deliverSigned(h, store.id, { type: "paid" });
      expectStatus(disabled, 404);
      assert.equal(errorOf(disabled).code, "plugin_not_found");
    });

    test("response codes: 401 webhook_rejected for a bad signature, and nothing changes", async () => {
      const { store, invoice } = await paymentSetup(h);
      const body = JSON.stringify({ type: "paid", invoiceId: invoice.id });
      const r = await deliver(h, store.id, "pay", body, { "x-signature": sign(body, "wrong-secret") });
      expectStatus(r, 401);
      assert.equal(errorOf(r).code, "webhook_rejected");
      assert.match(String(errorOf(r).message), /bad signature/);
      assert.equal((await invoiceView(h, store.key, invoice.id)).status, "pending");
    });

    test("response codes: 404 invoice_not_found for an unknown invoice or another store's invoice", async () => {
      const a = await paymentSetup(h);
      const b = await paymentSetup(h);
      for (const invoiceId of ["inv_nope", b.invoice.id]) {
        const r = await deliverSigned(h, a.store.id, { type: "paid", invoiceId });
        expectStatus(r, 404);
        assert.equal(errorOf(r).code, "invoice_not_found");
      }
      assert.equal((await invoiceView(h, b.store.key, b.invoice.id)).status, "pending", "the other store's invoice is untouched");
    });

    test("response codes: 413 payload_too_large above 1 MiB, and the body is not recorded", async () => {
      const { store } = await paymentSetup(h);
      const r = await deliver(h, store.id, "pay", "x".repeat(1024 * 1024 + 1), { "content-type": "text/plain" });
      expectStatus(r, 413);
      assert.equal(errorOf(r).code, "payload_too_large");
      expectStatus(await deliver(h, store.id, "pay", "x".repeat(1024 * 1024 - 100), { "content-type": "text/plain" }), 401);
    });

    test("response codes: 500 plugin_error for a raising plugin and for nonsense results; the service stays healthy", async () => {
      const store = await h.store();
      const cases: [string, RegExp][] = [
        ['error("boom at " .. 42)', /boom at 42/],
        ['local t = nil; return t.x', /attempt to index/],
        ["return 42", /.+/],
        ['return { status = "completeIt", invoiceId = "x" }', /.+/],
        ['return { status = "pushInvoice" }', /.+/],
        ['return { status = "pushInvoice", invoiceId = 7 }', /.+/],
      ];
      for (const [i, [source, message]] of cases.entries()) {
        await installPlugin(h, store.id, `bad${i}`, source, {});
        const r = await deliver(h, store.id, `bad${i}`, "{}");
        expectStatus(r, 500);
        assert.equal(errorOf(r).code, "plugin_error");
        assert.match(String(errorOf(r).message), message);
        expectStatus(await h.get("/healthz"), 200);
      }
    });

    test("response codes: 504 plugin_timeout for a runaway plugin; the next delivery works", async () => {
      const { store, invoice } = await paymentSetup(h);
      await installPlugin(h, store.id, "spin", "while true do end", {});
      const r = await deliver(h, store.id, "spin", "{}");
      expectStatus(r, 504);
      assert.equal(errorOf(r).code, "plugin_timeout");
      expectStatus(await deliverSigned(h, store.id, { type: "paid", invoiceId: invoice.id }), 200);
    });

    test("a merchant who fixes a broken plugin gets the retried delivery applied", async () => {
      const { store, invoice } = await paymentSetup(h);
      await installPlugin(h, store.id, "pay", 'error("typo")');
      const body = JSON.stringify({ type: "paid", invoiceId: invoice.id });
      const first = await deliver(h, store.id, "pay", body, { "x-signature": sign(body) });
      expectStatus(first, 500);
      // The fix is version 1's source again: re-uploading it makes version 1 current, no new version.
      const fixed = await installPlugin(h, store.id, "pay", SIGNED_PLUGIN);
      assert.equal(fixed.version, 1);
      const replay = await h.admin("POST", `/api/admin/stores/${store.id}/deliveries/${first.headers["x-delivery-id"]}/replay`);
      expectStatus(replay, 200);
      const out = replay.json<{ deliveryId: string; replayOf: string; status: number; response: Json }>();
      assert.equal(out.status, 200);
      assert.equal(out.replayOf, first.headers["x-delivery-id"]);
      assert.deepEqual(out.response, { status: "pushInvoice", invoiceId: invoice.id });
      assert.equal((await invoiceView(h, store.key, invoice.id)).status, "completed");
      const d = await h.admin("GET", `/api/admin/stores/${store.id}/deliveries/${out.deliveryId}`);
      assert.equal(d.json<Json>().replayOf, first.headers["x-delivery-id"]);
      assert.equal(d.json<Json>().pluginVersion, 1);
    });

    test("deliveries record headers, body, result, logs, fetches, duration and response; list pages newest first", async () => {
      const { store, invoice } = await paymentSetup(h);
      const r = await deliverSigned(h, store.id, { type: "paid", invoiceId: invoice.id });
      const id = String(r.headers["x-delivery-id"]);
      const d = (await h.admin("GET", `/api/admin/stores/${store.id}/deliveries/${id}`)).json<Json>();
      assert.equal(d.outcome, "applied");
      assert.equal(d.transition, "pending->completed");
      assert.equal(d.responseStatus, 200);
      assert.deepEqual(d.response, { status: "pushInvoice", invoiceId: invoice.id });
      assert.deepEqual(d.result, { status: "pushInvoice", invoiceId: invoice.id });
      const req = d.request as Json;
      assert.equal(req.body, JSON.stringify({ type: "paid", invoiceId: invoice.id }));
      assert.ok((req.headers as Json)["x-signature"]);
      assert.equal((d.logs as Json[]).length, 1);
      assert.deepEqual(d.fetches, []);
      assert.equal(typeof d.durationMs, "number");
      h.clock.advance(1000);
      await deliverSigned(h, store.id, { type: "other" });
      const list = (await h.admin("GET", `/api/admin/stores/${store.id}/deliveries?limit=1`)).json<{ data: Json[]; pagination: { nextCursor: string } }>();
      assert.equal(list.data[0]!.outcome, "ignored");
      const next = (await h.admin("GET", `/api/admin/stores/${store.id}/deliveries?limit=1&cursor=${list.pagination.nextCursor}`)).json<{ data: Json[] }>();
      assert.equal(next.data[0]!.id, id);
      expectStatus(await h.admin("GET", `/api/admin/stores/${store.id}/deliveries/dlv_nope`), 404);
    });

    test("secrets never appear in any response, delivery or invoice log, even when the plugin prints them", async () => {
      const { store, invoice } = await paymentSetup(h);
      await installPlugin(h, store.id, "leaky", `
        log("the key is " .. secrets.key, "info")
        if request.json.fail then error("failing with " .. secrets.key) end
        return { status = "ignore", invoiceId = request.json.invoiceId }`);
      const ok = await deliver(h, store.id, "leaky", JSON.stringify({ invoiceId: invoice.id }));
      const failed = await deliver(h, store.id, "leaky", JSON.stringify({ fail: true }));
      const sim = await h.admin("POST", `/api/admin/stores/${store.id}/plugins/leaky/simulate`, { body: JSON.stringify({ fail: true }) });
      const everything = [
        ok.body, failed.body, sim.body,
        (await h.admin("GET", `/api/admin/stores/${store.id}/deliveries/${ok.headers["x-delivery-id"]}`)).body,
        (await h.admin("GET", `/api/admin/stores/${store.id}/deliveries/${failed.headers["x-delivery-id"]}`)).body,
        (await h.admin("GET", `/api/admin/stores/${store.id}/plugins/leaky`)).body,
        (await h.admin("GET", `/api/admin/stores/${store.id}/plugins`)).body,
        (await h.get(`/api/service/invoices?id=${invoice.id}`, store.key)).body,
      ].join("\n");
      assert.equal(everything.includes(TEST_SECRET), false);
      assert.match(everything, /the key is \[secret\]/);
      const stored = await h.services.db.kysely.selectFrom("plugin_installations").select("secrets").where("store_id", "=", store.id).execute();
      for (const row of stored) assert.equal(row.secrets.includes(TEST_SECRET), false, "secrets are encrypted at rest");
      const plugin = (await h.admin("GET", `/api/admin/stores/${store.id}/plugins/leaky`)).json<{ secretNames: string[] }>();
      assert.deepEqual(plugin.secretNames, ["key"]);
    });

    test("getInvoice sees this store's invoices only", async () => {
      const a = await paymentSetup(h);
      const b = await paymentSetup(h);
      await installPlugin(h, a.store.id, "peek", `
        local mine = getInvoice(request.json.mine)
        local theirs = getInvoice(request.json.theirs)
        log(string.format("mine=%s total=%s theirs=%s", tostring(mine and mine.status), tostring(mine and mine.totalInUsd), tostring(theirs)))
        return { status = "ignore" }`, {});
      const r = await deliver(h, a.store.id, "peek", JSON.stringify({ mine: a.invoice.id, theirs: b.invoice.id }));
      expectStatus(r, 200);
      const d = (await h.admin("GET", `/api/admin/stores/${a.store.id}/deliveries/${r.headers["x-delivery-id"]}`)).json<{ logs: { description: string }[] }>();
      assert.equal(d.logs[0]!.description, "mine=pending total=49.99 theirs=nil");
    });

    test("simulation shows result, logs and time of any version and changes nothing", async () => {
      const { store, invoice } = await paymentSetup(h);
      const body = JSON.stringify({ type: "paid", invoiceId: invoice.id });
      const before = await h.services.db.kysely.selectFrom("deliveries").select((eb) => eb.fn.countAll().as("n")).executeTakeFirstOrThrow();
      const r = await h.admin("POST", `/api/admin/stores/${store.id}/plugins/pay/simulate`, { body, headers: { "X-Signature": sign(body) } });
      expectStatus(r, 200);
      const sim = r.json<Json>();
      assert.deepEqual(sim.result, { status: "pushInvoice", invoiceId: invoice.id });
      assert.equal(sim.error, null);
      assert.equal((sim.logs as Json[])[0]!.description, `received paid for ${invoice.id}`);
      assert.equal(typeof sim.durationMs, "number");
      assert.equal((await invoiceView(h, store.key, invoice.id)).status, "pending", "simulation changes nothing");
      const afterCount = await h.services.db.kysely.selectFrom("deliveries").select((eb) => eb.fn.countAll().as("n")).executeTakeFirstOrThrow();
      assert.equal(Number(afterCount.n), Number(before.n), "and records no delivery");
      const bad = await h.admin("POST", `/api/admin/stores/${store.id}/plugins/pay/simulate`, { body, headers: { "x-signature": "nope" } });
      assert.equal(bad.json<{ error: Json }>().error.kind, "rejected");
      expectStatus(await h.admin("POST", `/api/admin/stores/${store.id}/plugins/pay/simulate`, { body, version: 9 }), 404);
    });

    test("plugin installation: versions, old versions readable, compile errors refused with their line, catalogue by name", async () => {
      const store = await h.store();
      const v1 = await h.admin("PUT", `/api/admin/stores/${store.id}/plugins/p`, { source: 'return { status = "ignore" }' });
      expectStatus(v1, 201);
      assert.deepEqual(v1.json(), { name: "p", version: 1, enabled: true, reused: false });
      const broken = await h.admin("PUT", `/api/admin/stores/${store.id}/plugins/p`, { source: 'local a = 1\nlocal b = 2\nif a then\nreturn {' });
      expectStatus(broken, 422);
      assert.equal(errorOf(broken).code, "invalid_plugin");
      assert.equal(errorOf(broken).line, 4);
      assert.match(String(errorOf(broken).message), /line 4/);
      const v2 = await h.admin("PUT", `/api/admin/stores/${store.id}/plugins/p`, { source: 'log("v2") return { status = "ignore" }' });
      assert.equal(v2.json<Json>().version, 2);
      const versions = (await h.admin("GET", `/api/admin/stores/${store.id}/plugins/p/versions`)).json<{ data: Json[] }>().data;
      assert.deepEqual(versions.map((v) => [v.version, v.current]), [[2, true], [1, false]]);
      const old = await h.admin("GET", `/api/admin/stores/${store.id}/plugins/p/versions/1`);
      assert.equal(old.json<Json>().source, 'return { status = "ignore" }');
      const fromCatalog = await h.admin("PUT", `/api/admin/stores/${store.id}/plugins/hmac`, { catalog: "generic-hmac", secrets: { signingSecret: "abc" } });
      expectStatus(fromCatalog, 201);
      const shown = (await h.admin("GET", `/api/admin/stores/${store.id}/plugins/hmac`)).json<Json>();
      assert.equal(shown.catalog, "generic-hmac");
      expectStatus(await h.admin("PUT", `/api/admin/stores/${store.id}/plugins/x`, { catalog: "no-such-plugin" }), 404);
      expectStatus(await h.admin("PUT", `/api/admin/stores/${store.id}/plugins/${"bad name"}`, { source: "return {}" }), 400);
    });

    test("concurrent first installs of one plugin name all succeed: one creates it, the others add versions", async () => {
      const store = await h.store();
      // The service with a compile check that answers at once, so that every install reaches its
      // transaction together (through HTTP the sandbox's check staggers them).
      const plugins = createPluginsService(h.services.db.kysely, createSecretBox(randomBytes(32)), { check: () => ({ ok: true }) });
      const sources = Array.from({ length: 8 }, (_, n) => `log("upload ${n}") return { status = "ignore" }`);
      const results = await Promise.allSettled(sources.map((source) => plugins.install(store.id, "raced", { source })));
      const done = results.map((r) => (r.status === "fulfilled" ? r.value : assert.fail(String(r.reason))));
      assert.equal(done.filter((r) => r.created).length, 1, "exactly one upload created the installation");
      assert.deepEqual(done.map((r) => r.version).sort((a, b) => a - b), [1, 2, 3, 4, 5, 6, 7, 8]);
      const versions = (await h.admin("GET", `/api/admin/stores/${store.id}/plugins/raced/versions`)).json<{ data: Json[] }>().data;
      assert.equal(versions.length, 8);
    });

    test("delivery retention removes deliveries older than DELIVERY_RETENTION_DAYS", async () => {
      const { store } = await paymentSetup(h);
      const old = await deliverSigned(h, store.id, { type: "other" });
      h.clock.advance(31 * 86_400_000);
      const fresh = await deliverSigned(h, store.id, { type: "other" });
      const removed = await h.services.webhooks.pruneDeliveries();
      assert.ok(removed >= 1);
      expectStatus(await h.admin("GET", `/api/admin/stores/${store.id}/deliveries/${old.headers["x-delivery-id"]}`), 404);
      expectStatus(await h.admin("GET", `/api/admin/stores/${store.id}/deliveries/${fresh.headers["x-delivery-id"]}`), 200);
    });
  });
}

describe("webhook rate limit", () => {
  test("a store over its webhook rate limit gets 429 with Retry-After; another store is unaffected", async () => {
    const h = await createHarness("sqlite", { WEBHOOK_RATE_LIMIT_MAX: "2" });
    try {
      const a = await paymentSetup(h);
      const b = await paymentSetup(h);
      for (let i = 0; i < 2; i++) expectStatus(await deliverSigned(h, a.store.id, { type: "x" }), 200);
      const limited = await deliverSigned(h, a.store.id, { type: "x" });
      expectStatus(limited, 429);
      assert.equal(errorOf(limited).code, "rate_limited");
      assert.ok(Number(limited.headers["retry-after"]) > 0);
      expectStatus(await deliverSigned(h, b.store.id, { type: "x" }), 200);
    } finally {
      await h.close();
    }
  });
});
