// The admin API the console's plugin pages use: the compile check as you type, a dry run of unsaved
// source with the store's secrets, the catalogue's fixtures as sample requests, and recent outcomes.
import assert from "node:assert/strict";
import { createHmac } from "node:crypto";
import { after, before, describe, test } from "node:test";
import { createHarness, DIALECTS, expectStatus, type Harness } from "../helpers/harness.ts";

const SECRET = "console-test-secret";
const sign = (body: string) => createHmac("sha256", SECRET).update(body).digest("hex");

for (const { name: dialect, skip } of DIALECTS) {
  describe(`console plugin API on ${dialect}`, { skip }, () => {
    let h: Harness;
    let store: { id: string };
    let base: string;
    before(async () => {
      h = await createHarness(dialect);
      store = await h.store();
      base = `/api/admin/stores/${store.id}/plugins`;
      expectStatus(await h.admin("PUT", `${base}/pay`, { catalog: "generic-hmac", secrets: { signingSecret: SECRET } }), 201);
    });
    after(() => h.close());

    test("check compiles without saving: ok, or the error with its line", async () => {
      const ok = await h.admin("POST", `${base}/check`, { source: 'return { status = "ignore" }' });
      expectStatus(ok, 200);
      assert.deepEqual(ok.json(), { ok: true, errors: [] });
      const bad = await h.admin("POST", `${base}/check`, { source: 'local a = 1\nlocal b = \nreturn { status = "ignore" }' });
      expectStatus(bad, 200);
      const body = bad.json<{ ok: boolean; errors: { line: number; message: string }[] }>();
      assert.equal(body.ok, false);
      assert.equal(body.errors[0]!.line, 3);
      assert.ok(body.errors[0]!.message.length > 0);
      expectStatus(await h.admin("POST", `/api/admin/stores/st_nope/plugins/check`, { source: "return 1" }), 404);
      const versions = await h.admin("GET", `${base}/pay/versions`);
      assert.equal(versions.json<{ data: unknown[] }>().data.length, 1, "nothing saved");
    });

    test("simulate with source runs the unsaved code with the store's secrets and the recorded clock; the saved version is untouched", async () => {
      const body = JSON.stringify({ invoiceId: "inv_x", status: "paid" });
      const unsaved = `log("clock " .. os.time())\nif not timingSafeEqual(request.headers["x-signature"], hmacShaSign(secrets.signingSecret, request.body, "sha256")) then return { status = "reject" } end\nreturn { status = "ignore", invoiceId = "unsaved" }`;
      const r = await h.admin("POST", `${base}/pay/simulate`, { body, headers: { "X-Signature": sign(body) }, source: unsaved, receivedAt: "2024-05-01T00:00:00Z" });
      expectStatus(r, 200);
      const run = r.json<{ plugin: { unsaved: boolean; version: number }; result: { status: string; invoiceId: string }; logs: { description: string }[] }>();
      assert.deepEqual(run.plugin, { name: "pay", version: 1, enabled: true, unsaved: true });
      assert.deepEqual(run.result, { status: "ignore", invoiceId: "unsaved" });
      assert.equal(run.logs[0]!.description, `clock ${Date.parse("2024-05-01T00:00:00Z") / 1000}`);
      const saved = await h.admin("POST", `${base}/pay/simulate`, { body, headers: { "x-signature": sign(body) } });
      assert.equal(saved.json<{ plugin: { unsaved: boolean } }>().plugin.unsaved, false);
      assert.equal(saved.json<{ result: { status: string } }>().result.status, "pushInvoice", "the saved generic-hmac decides as always");
      const broken = await h.admin("POST", `${base}/pay/simulate`, { body, source: "local x = \nreturn {}" });
      expectStatus(broken, 200);
      const error = broken.json<{ error: { kind: string; line: number } }>().error;
      assert.equal(error.line, 2);
    });

    test("catalogue fixtures come as requests to try, without their secrets; an unknown plugin is 404", async () => {
      const r = await h.admin("GET", "/api/admin/catalog/generic-hmac/fixtures");
      expectStatus(r, 200);
      const paid = r.json<{ data: { name: string; request: { body: string; headers: Record<string, string> }; expect: unknown }[] }>().data.find((f) => f.name === "paid");
      assert.ok(paid);
      assert.equal(JSON.parse(paid.request.body).status, "paid");
      assert.ok(paid.request.headers["x-signature"]);
      assert.doesNotMatch(r.body, /catalog-generic-hmac-secret/);
      expectStatus(await h.admin("GET", "/api/admin/catalog/nope/fixtures"), 404);
    });

    test("outcomes count the plugin's last deliveries per outcome", async () => {
      const empty = await h.admin("GET", `${base}/pay/outcomes`);
      assert.deepEqual(empty.json(), { name: "pay", total: 0, outcomes: {}, lastAt: null });
      const post = (body: string, sig: string) =>
        h.app.inject({ method: "POST", url: `/api/paymentPlugins?pluginName=pay&storeId=${store.id}`, headers: { "content-type": "application/json", "x-signature": sig }, payload: body });
      const body = JSON.stringify({ invoiceId: "inv_none", status: "paid" });
      await post(body, sign(body));
      await post(body, "wrong");
      await post(body, "wrong");
      const r = await h.admin("GET", `${base}/pay/outcomes?last=10`);
      expectStatus(r, 200);
      const o = r.json<{ total: number; outcomes: Record<string, number>; lastAt: string }>();
      assert.equal(o.total, 3);
      assert.equal(Object.values(o.outcomes).reduce((a, b) => a + b, 0), 3);
      assert.equal(o.outcomes.rejected, 2);
      assert.ok(o.lastAt);
      const last1 = await h.admin("GET", `${base}/pay/outcomes?last=1`);
      assert.equal(last1.json<{ total: number }>().total, 1);
    });
  });
}
