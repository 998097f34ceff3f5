// The money path under attack, on SQLite and PostgreSQL: what the plugin decided is applied as it
// returned it (redaction never touches the decision), each provider event is applied once (a re-sent
// old "paid" cannot undo a dispute), and inputs that used to answer 500 answer 4xx in the envelope.
import assert from "node:assert/strict";
import { createHash, createHmac } from "node:crypto";
import { after, before, describe, test } from "node:test";
import { DIALECTS, createHarness, expectStatus, type Harness } from "../helpers/harness.ts";
import { deliver, installPlugin, invoiceView } from "../helpers/webhook.ts";

type Json = Record<string, unknown>;
const errorOf = (r: { json: <T>() => T }) => r.json<{ error: Json }>().error;
const SIGNING = "gh_s1gning_secret_0123";

/** generic-hmac from the catalogue, with the given extra secrets. */
async function genericHmac(h: Harness, storeId: string, secrets: Record<string, string> = {}) {
  const r = await h.admin("PUT", `/api/admin/stores/${storeId}/plugins/pay`, { catalog: "generic-hmac", secrets: { signingSecret: SIGNING, ...secrets } });
  if (r.statusCode !== 201 && r.statusCode !== 200) throw new Error(`install failed: ${r.statusCode} ${r.body}`);
}

const hmacHex = (body: string) => createHmac("sha256", SIGNING).update(body).digest("hex");

function postGeneric(h: Harness, storeId: string, event: Json) {
  const body = JSON.stringify(event);
  return deliver(h, storeId, "pay", body, { "x-signature": hmacHex(body) });
}

async function setup(h: Harness, secrets: Record<string, string> = {}) {
  const store = await h.store();
  await genericHmac(h, store.id, secrets);
  const customer = await h.customer(store.id);
  const invoice = await h.checkout(store.id, { customerId: customer.id, paymentMethod: "card", items: [{ productVariantId: "var-1", quantity: 1, price: 10 }] });
  return { store, invoice };
}

/** A plugin whose events carry an id and a type, signed over "<t>.<body>" like Stripe. */
const EVENT_PLUGIN = `
local sig = request.headers["x-signature"] or ""
local t = request.headers["x-timestamp"] or ""
if not timingSafeEqual(sig, hmacShaSign(secrets.key, t .. "." .. request.body, "sha256")) then reject("bad signature") end
local e = request.json
local kinds = { paid = "pushInvoice", dispute = "disputeInvoice", won = "pushInvoice" }
return { status = kinds[e.type] or "ignore", invoiceId = e.invoiceId, eventId = e.id }
`;
const EVENT_KEY = "evt_k3y_0123456789";
function postEvent(h: Harness, storeId: string, event: Json, timestamp: number, pluginName = "events") {
  const body = JSON.stringify(event);
  const sig = createHmac("sha256", EVENT_KEY).update(`${timestamp}.${body}`).digest("hex");
  return deliver(h, storeId, pluginName, body, { "x-signature": sig, "x-timestamp": String(timestamp) });
}

for (const dialect of DIALECTS) {
  describe(`money path on ${dialect.name}`, { skip: dialect.skip }, () => {
    let h: Harness;
    before(async () => {
      h = await createHarness(dialect.name, { WEBHOOK_RATE_LIMIT_MAX: "100000" });
    });
    after(async () => {
      await h?.close();
    });

    describe("redaction never changes the decision", () => {
      test('a secret equal to "status" (generic-hmac\'s own statusPath default): a paid webhook for a completed invoice stays completed, 200', async () => {
        const { store, invoice } = await setup(h, { statusPath: "status" });
        expectStatus(await postGeneric(h, store.id, { invoiceId: invoice.id, status: "paid" }), 200);
        const again = await postGeneric(h, store.id, { invoiceId: invoice.id, status: "paid", attempt: 2 });
        expectStatus(again, 200);
        assert.deepEqual(again.json(), { status: "pushInvoice", invoiceId: invoice.id });
        assert.equal((await invoiceView(h, store.key, invoice.id)).status, "completed");
      });

      for (const [label, value] of [
        ["Invoice", "Invoice"],
        ["invoiceId", "invoiceId"],
        ['a value containing `":"p`', '":"p'],
      ] as const) {
        test(`a secret equal to ${label}: pushInvoice is applied as pushInvoice`, async () => {
          const { store, invoice } = await setup(h, { note: value });
          const r = await postGeneric(h, store.id, { invoiceId: invoice.id, status: "paid" });
          expectStatus(r, 200);
          assert.deepEqual(r.json(), { status: "pushInvoice", invoiceId: invoice.id });
          assert.equal((await invoiceView(h, store.key, invoice.id)).status, "completed");
        });
      }

      test("a secret equal to the invoice id: the right invoice is completed, and the recorded copies hide the value", async () => {
        const { store, invoice } = await setup(h);
        await genericHmac(h, store.id, { note: invoice.id });
        const r = await postGeneric(h, store.id, { invoiceId: invoice.id, status: "paid" });
        expectStatus(r, 200);
        assert.equal((await invoiceView(h, store.key, invoice.id)).status, "completed");
        const d = await h.admin("GET", `/api/admin/stores/${store.id}/deliveries/${String(r.headers["x-delivery-id"])}`);
        expectStatus(d, 200);
        const view = d.json<Json>();
        assert.equal(view.outcome, "applied");
        assert.equal(view.invoiceId, invoice.id, "the delivery still links its invoice");
        assert.ok(!JSON.stringify(view.result).includes(invoice.id), "the stored copy of the result is scrubbed");
        assert.equal((view.result as Json).status, "pushInvoice");
      });

      test("any action other than the three is rejected as plugin_error, never treated as a dispute", async () => {
        const store = await h.store();
        await installPlugin(h, store.id, "odd", `return { status = "push" .. "Invoice2", invoiceId = "x" }`);
        const r = await deliver(h, store.id, "odd", "{}");
        assert.equal(r.statusCode, 500);
        assert.equal(errorOf(r).code, "plugin_error");
      });
    });

    describe("each event is applied once", () => {
      test("the byte-identical original paid webhook re-sent after a dispute changes nothing and answers 200 as already applied", async () => {
        const { store, invoice } = await setup(h);
        const paid = JSON.stringify({ invoiceId: invoice.id, status: "paid" });
        const send = (body: string) => deliver(h, store.id, "pay", body, { "x-signature": hmacHex(body) });
        expectStatus(await send(paid), 200);
        expectStatus(await send(JSON.stringify({ invoiceId: invoice.id, status: "disputed" })), 200);
        assert.equal((await invoiceView(h, store.key, invoice.id)).status, "disputed");
        const resent = await send(paid);
        expectStatus(resent, 200);
        assert.deepEqual(resent.json(), { status: "pushInvoice", invoiceId: invoice.id });
        assert.equal((await invoiceView(h, store.key, invoice.id)).status, "disputed", "the old paid event cannot undo the dispute");
        const d = await h.admin("GET", `/api/admin/stores/${store.id}/deliveries/${String(resent.headers["x-delivery-id"])}`);
        assert.equal(d.json<Json>().outcome, "duplicate_event");
      });

      test("the same event id with a fresh signature timestamp is a duplicate; a new 'dispute won' event completes the invoice", async () => {
        const store = await h.store();
        await installPlugin(h, store.id, "events", EVENT_PLUGIN, { key: EVENT_KEY });
        const customer = await h.customer(store.id);
        const invoice = await h.checkout(store.id, { customerId: customer.id, paymentMethod: "card", items: [{ productVariantId: "v", quantity: 1, price: 5 }] });
        const t0 = 1_700_000_000;
        expectStatus(await postEvent(h, store.id, { id: "evt_1", type: "paid", invoiceId: invoice.id }, t0), 200);
        expectStatus(await postEvent(h, store.id, { id: "evt_2", type: "dispute", invoiceId: invoice.id }, t0 + 10), 200);
        const replayed = await postEvent(h, store.id, { id: "evt_1", type: "paid", invoiceId: invoice.id }, t0 + 3600);
        expectStatus(replayed, 200);
        assert.equal((await invoiceView(h, store.key, invoice.id)).status, "disputed");
        expectStatus(await postEvent(h, store.id, { id: "evt_3", type: "won", invoiceId: invoice.id }, t0 + 7200), 200);
        assert.equal((await invoiceView(h, store.key, invoice.id)).status, "completed", "a new event still moves the invoice");
      });

      test("events are remembered per store and plugin name: the same event id under another plugin name still applies", async () => {
        const store = await h.store();
        await installPlugin(h, store.id, "events", EVENT_PLUGIN, { key: EVENT_KEY });
        await installPlugin(h, store.id, "events2", EVENT_PLUGIN, { key: EVENT_KEY });
        const customer = await h.customer(store.id);
        const a = await h.checkout(store.id, { customerId: customer.id, paymentMethod: "card", items: [{ productVariantId: "v", quantity: 1, price: 5 }] });
        const b = await h.checkout(store.id, { customerId: customer.id, paymentMethod: "card", items: [{ productVariantId: "v", quantity: 1, price: 5 }] });
        expectStatus(await postEvent(h, store.id, { id: "evt_same", type: "paid", invoiceId: a.id }, 1), 200);
        expectStatus(await postEvent(h, store.id, { id: "evt_same", type: "paid", invoiceId: b.id }, 1, "events2"), 200);
        assert.equal((await invoiceView(h, store.key, b.id)).status, "completed");
      });

      test("a failed delivery is not remembered: the same bytes apply once the plugin is fixed, via replay", async () => {
        const store = await h.store();
        await installPlugin(h, store.id, "events", `error("broken")`, { key: EVENT_KEY });
        const customer = await h.customer(store.id);
        const invoice = await h.checkout(store.id, { customerId: customer.id, paymentMethod: "card", items: [{ productVariantId: "v", quantity: 1, price: 5 }] });
        const failed = await postEvent(h, store.id, { id: "evt_f", type: "paid", invoiceId: invoice.id }, 1);
        assert.equal(failed.statusCode, 500);
        await installPlugin(h, store.id, "events", EVENT_PLUGIN, { key: EVENT_KEY });
        const replay = await h.admin("POST", `/api/admin/stores/${store.id}/deliveries/${String(failed.headers["x-delivery-id"])}/replay`);
        expectStatus(replay, 200);
        assert.equal((await invoiceView(h, store.key, invoice.id)).status, "completed");
        const again = await h.admin("POST", `/api/admin/stores/${store.id}/deliveries/${String(failed.headers["x-delivery-id"])}/replay`);
        expectStatus(again, 200);
        const d = await h.admin("GET", `/api/admin/stores/${store.id}/deliveries/${again.json<{ deliveryId: string }>().deliveryId}`);
        assert.equal(d.json<Json>().outcome, "duplicate_event", "a second replay of an applied event changes nothing");
      });

      test("concurrent deliveries of one event id for different invoices apply it once", async () => {
        const store = await h.store();
        await installPlugin(h, store.id, "events", EVENT_PLUGIN, { key: EVENT_KEY });
        const customer = await h.customer(store.id);
        const invoices = await Promise.all(
          Array.from({ length: 8 }, () => h.checkout(store.id, { customerId: customer.id, paymentMethod: "card", items: [{ productVariantId: "v", quantity: 1, price: 5 }] })),
        );
        const answers = await Promise.all(invoices.map((inv) => postEvent(h, store.id, { id: "evt_race", type: "paid", invoiceId: inv.id }, 1)));
        for (const a of answers) expectStatus(a, 200);
        const completed = (await Promise.all(invoices.map((inv) => invoiceView(h, store.key, inv.id)))).filter((i) => i.status === "completed");
        assert.equal(completed.length, 1, "one event, one change");
      });

      test("an eventId that is not a non-empty string is an invalid result", async () => {
        const store = await h.store();
        await installPlugin(h, store.id, "odd", `return { status = "ignore", eventId = 12 }`);
        const r = await deliver(h, store.id, "odd", "{}");
        assert.equal(r.statusCode, 500);
        assert.match(String(errorOf(r).message), /eventId/);
      });

      test("without an eventId the event is known by the SHA-256 of its raw body", async () => {
        const { store, invoice } = await setup(h);
        const body = JSON.stringify({ invoiceId: invoice.id, status: "paid" });
        const r = await deliver(h, store.id, "pay", body, { "x-signature": hmacHex(body) });
        const rows = await h.services.db.kysely.selectFrom("applied_events").selectAll().where("store_id", "=", store.id).execute();
        assert.equal(rows.length, 1);
        assert.equal(rows[0]!.event_key, `sha256:${createHash("sha256").update(body).digest("hex")}`);
        assert.equal(rows[0]!.delivery_id, String(r.headers["x-delivery-id"]));
      });
    });

    describe("inputs that used to answer 500", () => {
      test("limit=Infinity, 1e309 and -Infinity answer 400 on every list route", async () => {
        const store = await h.store();
        for (const limit of ["Infinity", "1e309", "-Infinity", "NaN"]) {
          for (const url of [`/api/service/customers?limit=${limit}`, `/api/service/invoices?limit=${limit}`]) {
            const r = await h.get(url, store.key);
            assert.equal(r.statusCode, 400, `${url}: ${r.body}`);
            assert.equal(errorOf(r).param, "limit");
          }
          const d = await h.admin("GET", `/api/admin/stores/${store.id}/deliveries?limit=${limit}`);
          assert.equal(d.statusCode, 400, d.body);
        }
      });

      test("a NUL byte in an id, a store name, an item's productVariantId or a webhook query answers 400", async () => {
        const store = await h.store();
        const customer = await h.customer(store.id);
        const checks = [
          await h.get(`/api/service/customers?id=a%00b`, store.key),
          await h.get(`/api/service/invoices?id=a%00b`, store.key),
          await h.admin("POST", `/api/admin/stores`, { name: "a\u0000b" }),
          await h.admin("POST", `/api/admin/stores/${store.id}/invoices`, { customerId: customer.id, paymentMethod: "x", items: [{ productVariantId: "v\u0000", quantity: 1, price: 1 }] }),
          await h.app.inject({ method: "POST", url: `/api/paymentPlugins?pluginName=pay&storeId=${store.id}&x=%00`, payload: "{}" }),
        ];
        for (const r of checks) {
          assert.equal(r.statusCode, 400, r.body);
          assert.equal(errorOf(r).code, "invalid_request");
        }
      });

      test("a NUL byte in the invoiceId or eventId a plugin returns is answered for that delivery alone; the payments beside it apply", async () => {
        const store = await h.store();
        await installPlugin(h, store.id, "events", EVENT_PLUGIN, { key: EVENT_KEY });
        const customer = await h.customer(store.id);
        const invoices = [];
        for (let i = 0; i < 4; i++) invoices.push(await h.checkout(store.id, { customerId: customer.id, paymentMethod: "card", items: [{ productVariantId: "v", quantity: 1, price: 5 }] }));
        const t = Math.floor(Date.now() / 1000);
        const nulEvent = { id: "evt_nul\u0000event", type: "paid", invoiceId: invoices[1]!.id };
        // Sent together, so that on PostgreSQL the odd ones share their read and write statements with the others.
        const [badInvoice, oddEvent, ...good] = await Promise.all([
          postEvent(h, store.id, { id: "evt_nul_invoice", type: "paid", invoiceId: `${invoices[0]!.id}\u0000` }, t),
          postEvent(h, store.id, nulEvent, t),
          postEvent(h, store.id, { id: "evt_ok_2", type: "paid", invoiceId: invoices[2]!.id }, t),
          postEvent(h, store.id, { id: "evt_ok_3", type: "paid", invoiceId: invoices[3]!.id }, t),
        ]);
        assert.equal(badInvoice!.statusCode, 404, badInvoice!.body);
        assert.equal(errorOf(badInvoice!).code, "invoice_not_found");
        assert.equal(oddEvent!.statusCode, 200, oddEvent!.body);
        for (const r of good) assert.equal(r.statusCode, 200, r.body);
        for (const i of [1, 2, 3]) assert.equal((await invoiceView(h, store.key, invoices[i]!.id)).status, "completed");
        assert.equal((await invoiceView(h, store.key, invoices[0]!.id)).status, "pending", "the invoice whose id was not quite its own is untouched");
        // The event with a NUL in its id is still known when it comes again: applied once.
        const again = await postEvent(h, store.id, nulEvent, t);
        assert.equal(again.statusCode, 200, again.body);
        const logged = await h.admin("GET", `/api/admin/stores/${store.id}/deliveries/${String(again.headers["x-delivery-id"])}`);
        assert.equal(logged.json<{ outcome: string }>().outcome, "duplicate_event", logged.body);
      });

      test("a NUL byte from outside that is kept, not refused, is kept as U+FFFD: a stranger's event id, a plugin's log line", async () => {
        const { store, invoice } = await setup(h);
        await installPlugin(h, store.id, "picky", `reject("not ours")`);
        const stranger = await deliver(h, store.id, "picky", JSON.stringify({ id: "evt_\u0000x", type: "charge\u0000" }));
        assert.equal(stranger.statusCode, 401, stranger.body);
        const rejected = await h.admin("GET", `/api/admin/stores/${store.id}/deliveries/${String(stranger.headers["x-delivery-id"])}`);
        assert.equal(rejected.statusCode, 200, rejected.body);
        assert.equal(rejected.json<{ eventId: string }>().eventId, "evt_\uFFFDx");

        await installPlugin(h, store.id, "chatty", `log("line\\0end"); return { status = "pushInvoice", invoiceId = request.json.inv, eventId = "evt_chatty" }`);
        const paid = await deliver(h, store.id, "chatty", JSON.stringify({ inv: invoice.id }));
        assert.equal(paid.statusCode, 200, paid.body);
        const view = await invoiceView(h, store.key, invoice.id);
        assert.equal(view.status, "completed");
        assert.ok(
          view.invoiceLogs.some((l) => l.log === "line\uFFFDend"),
          JSON.stringify(view.invoiceLogs),
        );
      });

      test("a cursor carrying a NUL byte answers 400", async () => {
        const store = await h.store();
        const cursor = Buffer.from(JSON.stringify([Date.now(), "inv_\u0000"])).toString("base64url");
        const r = await h.get(`/api/service/invoices?cursor=${cursor}`, store.key);
        assert.equal(r.statusCode, 400, r.body);
      });

      test("a plugin version above 2^31 answers 400", async () => {
        const store = await h.store();
        await installPlugin(h, store.id, "p", `return { status = "ignore" }`);
        const r = await h.admin("GET", `/api/admin/stores/${store.id}/plugins/p/versions/3000000000`);
        assert.equal(r.statusCode, 400, r.body);
      });

      test("a path parameter over 100 characters answers 414 in the envelope with x-request-id", async () => {
        const r = await h.admin("GET", `/api/admin/stores/${"x".repeat(150)}/plugins`);
        assert.equal(r.statusCode, 414, r.body);
        assert.equal(errorOf(r).code, "uri_too_long");
        assert.ok(r.headers["x-request-id"]);
      });

      test("an empty Content-Type on the webhook is accepted like any other (the plugin decides)", async () => {
        const store = await h.store();
        await installPlugin(h, store.id, "p", `return { status = "ignore" }`);
        const r = await h.app.inject({ method: "POST", url: `/api/paymentPlugins?pluginName=p&storeId=${store.id}`, headers: { "content-type": "" }, payload: "{}" });
        assert.equal(r.statusCode, 200, r.body);
      });
    });
  });
}
