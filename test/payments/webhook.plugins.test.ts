// The plugins behind the payment webhook, on SQLite and PostgreSQL: secrets never leave the service,
// getInvoice sees one store, simulation changes nothing, installation keeps versions and refuses what
// does not compile, and concurrent first installs of one name all succeed.
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { after, before, describe, test } from "node:test";
import { createPluginsService } from "../../src/plugins/plugins.service.ts";
import { createSecretBox } from "../../src/platform/crypto/secret-box.ts";
import { DIALECTS, createHarness, expectStatus, type Harness } from "../helpers/harness.ts";
import { TEST_SECRET, WEBHOOK_SUITE_ENV, deliver, errorOf, installPlugin, invoiceView, paymentSetup, sign } from "../helpers/webhook.ts";

type Json = Record<string, unknown>;

for (const dialect of DIALECTS) {
  describe(`payment plugins on ${dialect.name}`, { skip: dialect.skip }, () => {
    let h: Harness;
    before(async () => {
      h = await createHarness(dialect.name, WEBHOOK_SUITE_ENV);
    });
    after(async () => {
      await h?.close();
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
  });
}
