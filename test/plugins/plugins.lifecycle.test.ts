// The plugin lifecycle through the admin API on SQLite and PostgreSQL: roll back to a version (no new
// version, and webhooks run it), identical re-uploads make no new version, remove an installation (its
// deliveries stay), and the diff between two versions.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { DIALECTS, createHarness, expectStatus, type Harness } from "../helpers/harness.ts";
import { deliver, deliverSigned, installPlugin, paymentSetup } from "../helpers/webhook.ts";

type Json = Record<string, unknown>;
const errorOf = (r: { json: <T>() => T }) => r.json<{ error: Json }>().error;

const V1 = 'log("one")\nreturn { status = "ignore" }\n';
const V2 = 'log("two")\nreturn { status = "ignore" }\n';
const V3 = 'log("three")\nlog("and more")\nreturn { status = "ignore" }\n';

for (const dialect of DIALECTS) {
  describe(`plugin lifecycle on ${dialect.name}`, { skip: dialect.skip }, () => {
    let h: Harness;
    before(async () => {
      h = await createHarness(dialect.name, { WEBHOOK_RATE_LIMIT_MAX: "100000" });
    });
    after(async () => {
      await h?.close();
    });

    async function threeVersions() {
      const store = await h.store();
      for (const source of [V1, V2, V3]) await installPlugin(h, store.id, "p", source);
      return store;
    }
    const versionsOf = async (storeId: string) =>
      (await h.admin("GET", `/api/admin/stores/${storeId}/plugins/p/versions`)).json<{ data: Json[] }>().data.map((v) => [v.version, v.current]);
    const logOf = async (storeId: string) => {
      const r = await deliver(h, storeId, "p", "{}");
      expectStatus(r, 200);
      const d = await h.admin("GET", `/api/admin/stores/${storeId}/deliveries/${String(r.headers["x-delivery-id"])}`);
      const view = d.json<{ pluginVersion: number; logs: { description: string }[] }>();
      return { version: view.pluginVersion, first: view.logs[0]!.description };
    };

    test("rollback makes version N current without a new version; webhooks run it; the next upload numbers after the highest", async () => {
      const store = await threeVersions();
      const r = await h.admin("POST", `/api/admin/stores/${store.id}/plugins/p/rollback`, { version: 1 });
      expectStatus(r, 200);
      assert.equal(r.json<Json>().version, 1);
      assert.deepEqual(await versionsOf(store.id), [[3, false], [2, false], [1, true]]);
      assert.deepEqual(await logOf(store.id), { version: 1, first: "one" });
      assert.equal((await h.admin("GET", `/api/admin/stores/${store.id}/plugins/p`)).json<Json>().source, V1);
      const v4 = await installPlugin(h, store.id, "p", 'log("four") return { status = "ignore" }');
      assert.equal(v4.version, 4, "not 2, which exists");
      const forward = await h.admin("POST", `/api/admin/stores/${store.id}/plugins/p/rollback`, { version: 3 });
      assert.equal(forward.json<Json>().version, 3, "rolling forward works the same way");
    });

    test("an identical re-upload makes no new version: of the current source, or of an older one (which becomes current)", async () => {
      const store = await threeVersions();
      assert.equal((await installPlugin(h, store.id, "p", V3)).version, 3);
      assert.equal((await installPlugin(h, store.id, "p", V2)).version, 2);
      assert.deepEqual(await versionsOf(store.id), [[3, false], [2, true], [1, false]]);
      assert.deepEqual(await logOf(store.id), { version: 2, first: "two" });
    });

    test("rollback errors: 404 for a version, plugin or store that does not exist, 400 for a bad body; nothing changes", async () => {
      const store = await threeVersions();
      const missing = await h.admin("POST", `/api/admin/stores/${store.id}/plugins/p/rollback`, { version: 9 });
      expectStatus(missing, 404);
      assert.deepEqual([errorOf(missing).code, errorOf(missing).param], ["plugin_not_found", "version"]);
      expectStatus(await h.admin("POST", `/api/admin/stores/${store.id}/plugins/nope/rollback`, { version: 1 }), 404);
      assert.equal(errorOf(await h.admin("POST", `/api/admin/stores/st_nope/plugins/p/rollback`, { version: 1 })).code, "store_not_found");
      for (const body of [{}, { version: 0 }, { version: "one" }, { version: 1, extra: true }]) {
        const bad = await h.admin("POST", `/api/admin/stores/${store.id}/plugins/p/rollback`, body);
        expectStatus(bad, 400);
        assert.equal(errorOf(bad).code, "invalid_request");
      }
      assert.deepEqual(await versionsOf(store.id), [[3, true], [2, false], [1, false]]);
      const noToken = await h.app.inject({ method: "POST", url: `/api/admin/stores/${store.id}/plugins/p/rollback`, payload: { version: 1 } });
      expectStatus(noToken, 401);
    });

    test("delete removes the installation, its versions and secrets; its deliveries stay; webhooks answer 404; a new install starts at version 1", async () => {
      const { store, invoice } = await paymentSetup(h);
      const paid = await deliverSigned(h, store.id, { type: "paid", invoiceId: invoice.id });
      expectStatus(paid, 200);
      const deliveryId = String(paid.headers["x-delivery-id"]);
      const del = await h.admin("DELETE", `/api/admin/stores/${store.id}/plugins/pay`);
      expectStatus(del, 204);
      assert.equal(del.body, "");
      expectStatus(await h.admin("GET", `/api/admin/stores/${store.id}/plugins/pay`), 404);
      assert.deepEqual((await h.admin("GET", `/api/admin/stores/${store.id}/plugins`)).json<Json>().data, []);
      const after = await deliverSigned(h, store.id, { type: "paid", invoiceId: invoice.id });
      expectStatus(after, 404);
      assert.equal(errorOf(after).code, "plugin_not_found");
      const kept = await h.admin("GET", `/api/admin/stores/${store.id}/deliveries/${deliveryId}`);
      expectStatus(kept, 200);
      assert.equal(kept.json<Json>().pluginName, "pay");
      const again = await h.admin("DELETE", `/api/admin/stores/${store.id}/plugins/pay`);
      expectStatus(again, 404);
      assert.equal(errorOf(again).code, "plugin_not_found");
      const reinstalled = await installPlugin(h, store.id, "pay", V1, {});
      assert.deepEqual(reinstalled, { name: "pay", version: 1, enabled: true, reused: false });
      const shown = (await h.admin("GET", `/api/admin/stores/${store.id}/plugins/pay`)).json<Json>();
      assert.deepEqual(shown.secretNames, [], "the old secrets went with the installation");
    });

    test("a deleted installation leaves no versions behind in the database", async () => {
      const store = await threeVersions();
      const before = await h.services.db.kysely.selectFrom("plugin_versions").select((eb) => eb.fn.countAll().as("n")).executeTakeFirstOrThrow();
      expectStatus(await h.admin("DELETE", `/api/admin/stores/${store.id}/plugins/p`), 204);
      const afterCount = await h.services.db.kysely.selectFrom("plugin_versions").select((eb) => eb.fn.countAll().as("n")).executeTakeFirstOrThrow();
      assert.equal(Number(before.n) - Number(afterCount.n), 3);
    });

    test("diff: a unified diff between two versions, by default the current one against the one before", async () => {
      const store = await threeVersions();
      const r = await h.admin("GET", `/api/admin/stores/${store.id}/plugins/p/diff`);
      expectStatus(r, 200);
      const d = r.json<Json>();
      assert.deepEqual([d.from, d.to].map((v) => (v as Json).version), [2, 3]);
      assert.deepEqual([d.identical, d.added, d.removed], [false, 2, 1]);
      assert.equal(d.diff, ["--- p v2", "+++ p v3", "@@ -1,2 +1,3 @@", '-log("two")', '+log("three")', '+log("and more")', ' return { status = "ignore" }', ""].join("\n"));
      const explicit = (await h.admin("GET", `/api/admin/stores/${store.id}/plugins/p/diff?from=3&to=1`)).json<Json>();
      assert.match(String(explicit.diff), /^--- p v3\n\+\+\+ p v1\n/);
      const same = (await h.admin("GET", `/api/admin/stores/${store.id}/plugins/p/diff?from=2&to=2`)).json<Json>();
      assert.deepEqual([same.identical, same.diff, same.added, same.removed], [true, "", 0, 0]);
    });

    test("diff errors: 404 for a missing version, 400 when version 1 has nothing before it or a query is bad", async () => {
      const store = await threeVersions();
      const missing = await h.admin("GET", `/api/admin/stores/${store.id}/plugins/p/diff?from=1&to=7`);
      expectStatus(missing, 404);
      assert.equal(errorOf(missing).param, "version");
      const first = await h.admin("GET", `/api/admin/stores/${store.id}/plugins/p/diff?to=1`);
      expectStatus(first, 400);
      assert.equal(errorOf(first).param, "from");
      expectStatus(await h.admin("GET", `/api/admin/stores/${store.id}/plugins/p/diff?from=x`), 400);
      expectStatus(await h.admin("GET", `/api/admin/stores/${store.id}/plugins/p/diff?since=1`), 400);
      expectStatus(await h.admin("GET", `/api/admin/stores/${store.id}/plugins/nope/diff`), 404);
    });

    test("the lifecycle routes are in the OpenAPI document with every status they answer", async () => {
      const doc = (await h.app.inject({ method: "GET", url: "/openapi.json" })).json<{ paths: Record<string, Record<string, { responses: Json }>> }>();
      const base = "/api/admin/stores/{storeId}/plugins/{name}";
      // Besides what every route can answer (400 unknown_version, 414, 429, 500, 503, listed for all of them):
      const has = (responses: Json, statuses: string[]) => statuses.every((s) => s in responses);
      assert.ok(has(doc.paths[base]!.delete!.responses, ["204", "401", "404"]));
      assert.ok(has(doc.paths[`${base}/rollback`]!.post!.responses, ["200", "400", "401", "404"]));
      assert.ok(has(doc.paths[`${base}/diff`]!.get!.responses, ["200", "400", "401", "404"]));
    });
  });
}
