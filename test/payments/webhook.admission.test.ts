// What a webhook passes before its plugin runs, on SQLite and PostgreSQL:
// - payments first: only a delivery whose body has arrived, for a store and an enabled plugin that exist,
//   enters the gate that holds read pages back; a body still arriving, an unknown store or plugin, a
//   disabled plugin hold nothing;
// - a plugin's source ranges: a delivery from any other address is 403 source_not_allowed, nothing runs
//   and nothing is recorded; the ranges are stored with the installation, shown, and removed with null;
// - forgeries from an address never stop the provider's signed delivery from that same address (one
//   address for every sender, as behind a proxy TRUST_PROXY does not name).
import assert from "node:assert/strict";
import { Readable } from "node:stream";
import { after, before, describe, test } from "node:test";
import { DIALECTS, createHarness, expectStatus, type Harness } from "../helpers/harness.ts";
import { SIGNED_PLUGIN, installPlugin, paymentSetup, sign } from "../helpers/webhook.ts";

const PROXY = "10.0.0.2";

for (const { name: dialect, skip } of DIALECTS) {
  describe(`webhook admission on ${dialect}`, { skip }, () => {
    let h: Harness;
    let entered = 0;
    before(async () => {
      h = await createHarness(dialect, { WEBHOOK_UNVERIFIED_LIMIT_MAX: "60" });
      // Counts entries into the payments-first gate (the route asks the services object for it each time).
      const gate = h.services.paymentsFirst;
      const enter = gate.enter.bind(gate);
      gate.enter = () => {
        entered++;
        return enter();
      };
    });
    after(async () => {
      await h?.close();
    });

    const post = (storeId: string, plugin: string, body: string | Readable, headers: Record<string, string> = {}, ip = "127.0.0.1") =>
      h.app.inject({ method: "POST", url: `/api/paymentPlugins?pluginName=${plugin}&storeId=${storeId}`, payload: body, headers: { "content-type": "application/json", ...headers }, remoteAddress: ip });

    test("a body still arriving holds no reads back; once it has arrived, a delivery to an enabled plugin does", async () => {
      const { store } = await paymentSetup(h);
      let reading!: () => void;
      const bodyRead = new Promise<void>((resolve) => (reading = resolve));
      let finish!: () => void;
      const more = new Promise<void>((resolve) => (finish = resolve));
      let sent = 0;
      const body = new Readable({
        read() {
          if (sent === 0) {
            sent++;
            this.push('{"type":"noise","pad":"');
            reading();
          } else if (sent === 1) {
            sent++;
            void more.then(() => {
              this.push('x"}');
              this.push(null);
            });
          }
        },
      });
      const before = entered;
      const answer = post(store.id, "pay", body);
      await bodyRead; // the request's hooks have run: its body is being read
      assert.equal(entered, before, "nothing held while the body is still arriving");
      assert.equal(h.services.paymentsFirst.active, 0);
      finish();
      const r = await answer;
      assert.equal(r.statusCode, 401, "read whole, then rejected by the plugin (unsigned)");
      assert.equal(entered, before + 1, "entered once the body had arrived");
    });

    test("an unknown store, an unknown plugin and a disabled plugin hold nothing", async () => {
      const { store } = await paymentSetup(h);
      await installPlugin(h, store.id, "off", SIGNED_PLUGIN);
      expectStatus(await h.admin("PUT", `/api/admin/stores/${store.id}/plugins/off`, { enabled: false }), 200);
      const before = entered;
      expectStatus(await post("st_nope", "pay", "{}"), 404);
      expectStatus(await post(store.id, "nope", "{}"), 404);
      expectStatus(await post(store.id, "off", "{}"), 404);
      assert.equal(entered, before);
    });

    test("source ranges: stored, shown, enforced with 403 source_not_allowed before any work, removed with null", async () => {
      const { store, invoice } = await paymentSetup(h);
      const put = await h.admin("PUT", `/api/admin/stores/${store.id}/plugins/pay`, { allowedSources: ["203.0.113.0/24", "2001:db8::/32"] });
      expectStatus(put, 200);
      const shown = await h.admin("GET", `/api/admin/stores/${store.id}/plugins/pay`);
      assert.deepEqual(shown.json<{ allowedSources: string[] }>().allowedSources, ["203.0.113.0/24", "2001:db8::/32"]);
      assert.deepEqual((await h.admin("GET", `/api/admin/stores/${store.id}/plugins`)).json<{ data: { allowedSources: unknown }[] }>().data[0]!.allowedSources, ["203.0.113.0/24", "2001:db8::/32"]);

      const body = JSON.stringify({ type: "paid", invoiceId: invoice.id });
      const before = { entered, deliveries: (await h.services.db.kysely.selectFrom("deliveries").select("id").where("store_id", "=", store.id).execute()).length };
      const refused = await post(store.id, "pay", body, { "x-signature": sign(body) }, "198.51.100.7");
      expectStatus(refused, 403);
      assert.equal(refused.json<{ error: { code: string } }>().error.code, "source_not_allowed");
      assert.equal(refused.headers["x-delivery-id"], undefined);
      assert.equal(entered, before.entered, "no plugin work, no gate");
      assert.equal((await h.services.db.kysely.selectFrom("deliveries").select("id").where("store_id", "=", store.id).execute()).length, before.deliveries, "nothing recorded");
      expectStatus(await post(store.id, "pay", body, { "x-signature": sign(body) }, "::ffff:203.0.113.9"), 200);

      expectStatus(await h.admin("PUT", `/api/admin/stores/${store.id}/plugins/pay`, { allowedSources: null }), 200);
      assert.equal((await h.admin("GET", `/api/admin/stores/${store.id}/plugins/pay`)).json<{ allowedSources: unknown }>().allowedSources, null);
      const again = JSON.stringify({ type: "ignored" });
      expectStatus(await post(store.id, "pay", again, { "x-signature": sign(again) }, "198.51.100.7"), 200);
    });

    test("source ranges that are not addresses or CIDRs, or none at all, are 400 naming allowedSources", async () => {
      const store = await h.store();
      for (const allowedSources of [["stripe.com"], ["10.0.0.0/33"], ["loopback"], [], ["1.2.3.4/8/9"]]) {
        const r = await h.admin("PUT", `/api/admin/stores/${store.id}/plugins/p`, { source: 'return { status = "ignore" }', allowedSources });
        expectStatus(r, 400);
        assert.equal(r.json<{ error: { param: string } }>().error.param, "allowedSources", JSON.stringify(allowedSources));
      }
    });

    test("70 forgeries from one address do not stop the provider's signed delivery from that address; the forgeries past the budget are 429", async () => {
      const { store, invoice } = await paymentSetup(h);
      const answers: number[] = [];
      for (let i = 0; i < 70; i++) answers.push((await post(store.id, "pay", JSON.stringify({ type: "paid", invoiceId: invoice.id, n: i }), { "x-signature": "0".repeat(64) }, PROXY)).statusCode);
      assert.equal(answers.filter((s) => s === 401).length, 60);
      assert.equal(answers.filter((s) => s === 429).length, 10);
      const body = JSON.stringify({ type: "paid", invoiceId: invoice.id });
      const genuine = await post(store.id, "pay", body, { "x-signature": sign(body) }, PROXY);
      expectStatus(genuine, 200);
      // Posts to a plugin that is not there have nothing to verify: past the budget they are refused at once.
      for (let i = 0; i < 60; i++) await post(store.id, "gone", "{}", {}, "10.0.0.3");
      const refused = await post(store.id, "gone", "{}", {}, "10.0.0.3");
      expectStatus(refused, 429);
      assert.equal(refused.headers["x-delivery-id"], undefined, "refused before anything was recorded");
    });
  });
}
