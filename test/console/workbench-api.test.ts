// The admin API behind the console's workbench (issue 31), on both databases: a save names the version it
// was based on and a stale one is refused with 409 version_conflict; a save identical to an older version
// says so; version notes; catalogue plugins declare their settings and the required ones are enforced;
// PUT …/secrets replaces the settings alone; the bench runs a recorded delivery by id on the server (any
// size the webhook took) and signs a body with the store's own secret.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { catalogFixture } from "../helpers/catalog.ts";
import { createHarness, DIALECTS, expectStatus, type Harness } from "../helpers/harness.ts";
import { deliver, installPlugin } from "../helpers/webhook.ts";

type Json = Record<string, unknown>;
const err = (r: { json: <T>() => T }) => r.json<{ error: Json & { code: string; message: string } }>().error;
const V1 = 'return { status = "ignore" }';
const V2 = '-- v2\nreturn { status = "ignore" }';
const V3 = '-- v3\nreturn { status = "ignore" }';

for (const { name: dialect, skip } of DIALECTS) {
  describe(`console workbench API on ${dialect}`, { skip }, () => {
    let h: Harness;
    let store: { id: string };
    let base: string;
    before(async () => {
      h = await createHarness(dialect);
      store = await h.store();
      base = `/api/admin/stores/${store.id}/plugins`;
    });
    after(() => h.close());

    test("a save based on an older version than the current one is refused with 409 version_conflict and changes nothing", async () => {
      await installPlugin(h, store.id, "tabs", V1, {});
      const tabA = await h.admin("PUT", `${base}/tabs`, { source: V2, baseVersion: 1 });
      expectStatus(tabA, 200);
      assert.equal(tabA.json<{ version: number }>().version, 2);
      const tabB = await h.admin("PUT", `${base}/tabs`, { source: V3, baseVersion: 1 });
      expectStatus(tabB, 409);
      assert.equal(err(tabB).code, "version_conflict");
      assert.equal(err(tabB).currentVersion, 2);
      assert.equal(err(tabB).baseVersion, 1);
      assert.equal(err(tabB).param, "baseVersion");
      const shown = (await h.admin("GET", `${base}/tabs`)).json<{ version: number; source: string }>();
      assert.deepEqual([shown.version, shown.source], [2, V2], "tab A's change is still current");
      expectStatus(await h.admin("PUT", `${base}/tabs`, { source: V3, baseVersion: 2 }), 200);
    });

    test("a save based on a version of a removed plugin is a version_conflict naming no current version", async () => {
      const r = await h.admin("PUT", `${base}/gone`, { source: V1, baseVersion: 3 });
      expectStatus(r, 409);
      assert.equal(err(r).currentVersion, null);
    });

    test("a save whose source is an older version's makes that version current again and says so; a note is kept with a new version", async () => {
      await installPlugin(h, store.id, "notes", V1, {});
      const v2 = await h.admin("PUT", `${base}/notes`, { source: V2, baseVersion: 1, note: "log the event id" });
      assert.deepEqual(v2.json(), { name: "notes", version: 2, enabled: true, reused: false });
      const back = await h.admin("PUT", `${base}/notes`, { source: V1, baseVersion: 2, note: "ignored: no new version" });
      assert.deepEqual(back.json(), { name: "notes", version: 1, enabled: true, reused: true });
      const versions = (await h.admin("GET", `${base}/notes/versions`)).json<{ data: { version: number; note: string | null; current: boolean }[] }>().data;
      assert.deepEqual(
        versions.map((v) => [v.version, v.note, v.current]),
        [
          [2, "log the event id", false],
          [1, null, true],
        ],
      );
    });

    test("the catalogue declares each plugin's settings: name, required, description", async () => {
      const r = await h.admin("GET", "/api/admin/catalog");
      expectStatus(r, 200);
      const stripe = r.json<{ data: { name: string; secrets: { name: string; required: boolean; description: string }[]; signable: boolean }[] }>().data.find((c) => c.name === "stripe")!;
      const signing = stripe.secrets.find((s) => s.name === "signingSecret")!;
      assert.equal(signing.required, true);
      assert.match(signing.description, /signing secret/);
      assert.equal(stripe.secrets.find((s) => s.name === "stripeApiKey")!.required, false);
      assert.equal(stripe.signable, true);
      const paypal = r.json<{ data: { name: string; secrets: { name: string; required: boolean }[]; signable: boolean }[] }>().data.find((c) => c.name === "paypal")!;
      assert.deepEqual(paypal.secrets.filter((s) => s.required).map((s) => s.name), ["clientId", "clientSecret", "webhookId"]);
      assert.equal(paypal.signable, false);
    });

    test("installing stripe without signingSecret is a 400 naming the missing setting; with it, it installs", async () => {
      const r = await h.admin("PUT", `${base}/stripe`, { catalog: "stripe" });
      expectStatus(r, 400);
      assert.equal(err(r).param, "secrets");
      assert.match(err(r).message, /signingSecret/);
      assert.deepEqual(err(r).missing, ["signingSecret"]);
      expectStatus(await h.admin("PUT", `${base}/stripe`, { catalog: "stripe", secrets: { signingSecret: "   " } }), 400);
      expectStatus(await h.admin("GET", `${base}/stripe`), 404);
      expectStatus(await h.admin("PUT", `${base}/stripe`, { catalog: "stripe", secrets: { signingSecret: "whsec_x" } }), 201);
      const deleting = await h.admin("PUT", `${base}/stripe`, { secrets: { signingSecret: null } });
      expectStatus(deleting, 400);
    });

    test("PUT …/secrets replaces the settings whole and leaves a customised version's code and version untouched", async () => {
      expectStatus(await h.admin("PUT", `${base}/hmac`, { catalog: "generic-hmac", secrets: { signingSecret: "one", algorithm: "sha1" } }), 201);
      const custom = await h.admin("PUT", `${base}/hmac`, { source: `-- customised\n${(await h.admin("GET", `${base}/hmac`)).json<{ source: string }>().source}`, baseVersion: 1 });
      assert.equal(custom.json<{ version: number }>().version, 2);
      const r = await h.admin("PUT", `${base}/hmac/secrets`, { secrets: { signingSecret: "two" } });
      expectStatus(r, 200);
      const info = r.json<{ version: number; secretNames: string[]; catalogBase: string; catalog: string | null }>();
      assert.deepEqual([info.version, info.secretNames, info.catalogBase, info.catalog], [2, ["signingSecret"], "generic-hmac", null]);
      const shown = (await h.admin("GET", `${base}/hmac`)).json<{ version: number; source: string }>();
      assert.ok(shown.source.startsWith("-- customised"), "the customised code stays");
      assert.equal((await h.admin("GET", `${base}/hmac/versions`)).json<{ data: unknown[] }>().data.length, 2, "no version made");
      const missing = await h.admin("PUT", `${base}/hmac/secrets`, { secrets: { algorithm: "sha256" } });
      expectStatus(missing, 400);
      assert.match(err(missing).message, /generic-hmac needs the setting signingSecret/);
      const kept = await h.admin("PUT", `${base}/hmac/secrets`, { secrets: { algorithm: "sha512" }, keep: ["signingSecret", "notStored"] });
      expectStatus(kept, 200);
      assert.deepEqual(kept.json<{ secretNames: string[] }>().secretNames, ["algorithm", "signingSecret"], "kept the stored signing secret");
      expectStatus(await h.admin("PUT", `${base}/nope/secrets`, { secrets: {} }), 404);
      expectStatus(await h.admin("PUT", `${base}/hmac/secrets`, { secrets: { "bad name": "x" } }), 400);
    });

    test("a plugin not from the catalogue takes any settings, none required", async () => {
      await installPlugin(h, store.id, "own", V1, { a: "1" });
      const r = await h.admin("PUT", `${base}/own/secrets`, { secrets: {} });
      expectStatus(r, 200);
      assert.deepEqual(r.json<{ secretNames: string[] }>().secretNames, []);
    });

    test("the bench runs a recorded delivery of almost 1 MiB by id, byte for byte, on its receipt time", async () => {
      await installPlugin(h, store.id, "big", 'log("bytes " .. #request.body .. " at " .. os.time() .. " h " .. tostring(request.headers["x-big"]))\nreturn { status = "ignore" }', {});
      h.clock.set("2024-03-01T10:00:00Z");
      const body = JSON.stringify({ pad: "x".repeat(1_000_000) });
      const sent = await deliver(h, store.id, "big", body, { "x-big": "yes" });
      expectStatus(sent, 200);
      h.clock.set("2024-03-09T10:00:00Z");
      const r = await h.admin("POST", `${base}/big/simulate`, { deliveryId: String(sent.headers["x-delivery-id"]) });
      expectStatus(r, 200);
      const run = r.json<{ logs: { description: string }[]; request: { receivedAt: string; signed: boolean } }>();
      assert.equal(run.logs[0]!.description, `bytes ${Buffer.byteLength(body)} at ${Date.parse("2024-03-01T10:00:00Z") / 1000} h yes`);
      assert.equal(run.request.receivedAt, "2024-03-01T10:00:00.000Z");
      const unknown = await h.admin("POST", `${base}/big/simulate`, { deliveryId: "dlv_nope" });
      expectStatus(unknown, 404);
      assert.equal(err(unknown).code, "delivery_not_found");
      expectStatus(await h.admin("POST", `${base}/big/simulate`, { deliveryId: String(sent.headers["x-delivery-id"]), body: "{}" }), 400);
    });

    test("a catalogue fixture signed with this store's secret verifies; unsigned, the fixture is rejected under it", async () => {
      expectStatus(await h.admin("PUT", `${base}/stripe-signed`, { catalog: "stripe", secrets: { signingSecret: "whsec_the_store_s_own" } }), 201);
      const fixture = catalogFixture("stripe", "checkout-session-completed");
      const request = { body: JSON.stringify(fixture.request.body), headers: fixture.request.headers };
      const plain = await h.admin("POST", `${base}/stripe-signed/simulate`, request);
      assert.equal(plain.json<{ error: { kind: string } | null }>().error?.kind, "rejected");
      const signed = await h.admin("POST", `${base}/stripe-signed/simulate`, { ...request, sign: true });
      expectStatus(signed, 200);
      const run = signed.json<{ error: unknown; request: { signed: boolean; headers: Record<string, string> } }>();
      assert.equal(run.error, null, JSON.stringify(run.error));
      assert.equal(run.request.signed, true);
      assert.match(run.request.headers["stripe-signature"]!, /^t=\d+,v1=[0-9a-f]{64}$/);
      assert.doesNotMatch(JSON.stringify(signed.json()), /whsec_the_store_s_own/, "the secret itself is not shown");
    });

    test("every signable catalogue plugin accepts its genuine fixtures signed with a store's own secret", async () => {
      const secret = "whsec_" + Buffer.alloc(24, 7).toString("base64");
      for (const name of ["generic-hmac", "stripe", "standard-webhooks", "coinbase-commerce", "nowpayments"]) {
        expectStatus(await h.admin("PUT", `${base}/sig-${name}`, { catalog: name, secrets: { signingSecret: secret } }), 201);
        const fixtures = (await h.admin("GET", `/api/admin/catalog/${name}/fixtures`)).json<{ data: { name: string; request: { headers: Record<string, string>; body: string }; expect: { error?: string } }[] }>().data;
        const genuine = fixtures.filter((f) => f.expect.error === undefined && !/header|missing/.test(f.name));
        assert.ok(genuine.length > 0, name);
        for (const f of genuine) {
          const r = await h.admin("POST", `${base}/sig-${name}/simulate`, { body: f.request.body, headers: f.request.headers, sign: true });
          expectStatus(r, 200);
          const run = r.json<{ error: { kind: string } | null; request: { signed: boolean } }>();
          assert.equal(run.request.signed, true);
          assert.notEqual(run.error?.kind, "rejected", `${name}/${f.name}: ${r.body.slice(0, 300)}`);
        }
      }
    });

    test("signing a plugin that is not from the catalogue, or whose provider cannot be signed, is a 400", async () => {
      const own = await h.admin("POST", `${base}/own/simulate`, { body: "{}", sign: true });
      expectStatus(own, 400);
      assert.equal(err(own).param, "sign");
      expectStatus(await h.admin("PUT", `${base}/pp`, { catalog: "paypal", secrets: { clientId: "a", clientSecret: "b", webhookId: "c" } }), 201);
      const paypal = await h.admin("POST", `${base}/pp/simulate`, { body: "{}", sign: true });
      expectStatus(paypal, 400);
      assert.match(err(paypal).message, /paypal's provider cannot be signed here/);
    });
  });
}
