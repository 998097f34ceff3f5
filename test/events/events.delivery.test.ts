// Events out through the real app on SQLite and PostgreSQL: events written with every invoice change and
// failed plugin run, the feed, endpoints, Standard Webhooks signing checked with the official library,
// retries on the contract's schedule (driven by the test clock), 410 and five-day disabling, rotation,
// resend.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import type { LightMyRequestResponse } from "fastify";
import { RETRY_SCHEDULE_MS } from "../../src/events/event-dispatcher.ts";
import { registerVersion } from "../../src/versioning/registry.ts";
import { createHarness, DIALECTS, expectStatus, type Harness } from "../helpers/harness.ts";
import { startReceiver, type Receiver } from "../helpers/receiver.ts";
import { deliver, deliverSigned, installPlugin, invoiceView, paymentSetup } from "../helpers/webhook.ts";

type Ev = { id: string; type: string; createdAt: string; data: { invoice?: { id: string; status: string; invoiceLogs: unknown[] }; delivery?: Record<string, unknown> } };
type Feed = { data: { events: Ev[] }; pagination: { limit: number; nextCursor: string } };
type Attempt = { eventId: string; attempt: number; outcome: string; responseStatus: number | null; error: string | null; responseExcerpt: string; durationMs: number };

async function feed(h: Harness, key: string, query = ""): Promise<Feed> {
  const r = await h.get(`/api/service/events${query}`, key);
  expectStatus(r, 200);
  return r.json<Feed>();
}

/** Every event of the store, paging from the start with a small page. */
async function allEvents(h: Harness, key: string): Promise<Ev[]> {
  const out: Ev[] = [];
  let cursor: string | null = null;
  for (;;) {
    const page: Feed = await feed(h, key, `?limit=3${cursor ? `&cursor=${cursor}` : ""}`);
    out.push(...page.data.events);
    if (page.data.events.length === 0) return out;
    cursor = page.pagination.nextCursor;
  }
}

async function addEndpoint(h: Harness, storeId: string, body: Record<string, unknown>) {
  const r = await h.admin("POST", `/api/admin/stores/${storeId}/endpoints`, body);
  expectStatus(r, 201);
  return r.json<{ id: string; secret: string; url: string; types: string[]; enabled: boolean }>();
}

async function attempts(h: Harness, storeId: string, endpointId: string): Promise<Attempt[]> {
  const r = await h.admin("GET", `/api/admin/stores/${storeId}/endpoints/${endpointId}/attempts`);
  expectStatus(r, 200);
  return r.json<{ data: Attempt[] }>().data.reverse(); // oldest first
}

const paid = (h: Harness, storeId: string, invoiceId: string) => deliverSigned(h, storeId, { type: "paid", invoiceId });

for (const { name: dialect, skip } of DIALECTS) {
  describe(`events out on ${dialect}`, { skip }, () => {
    let h: Harness;
    let receiver: Receiver;
    before(async () => {
      h = await createHarness(dialect, { ENDPOINT_ALLOW: "127.0.0.1" }, { dispatch: { timeoutMs: 400 } });
      receiver = await startReceiver();
    });
    after(async () => {
      await receiver.close();
      await h.close();
    });

    test("checkout, payment and dispute each write their event with the invoice as the list shows it then", async () => {
      const { store, invoice } = await paymentSetup(h);
      expectStatus(await paid(h, store.id, invoice.id), 200);
      const afterPayment = await invoiceView(h, store.key, invoice.id);
      expectStatus(await deliverSigned(h, store.id, { type: "dispute", invoiceId: invoice.id }), 200);
      // A won dispute is a new provider event (the identical "paid" again would be the same event, applied once).
      expectStatus(await deliverSigned(h, store.id, { type: "paid", invoiceId: invoice.id, reason: "dispute won" }), 200);
      const events = await allEvents(h, store.key);
      assert.deepEqual(
        events.map((e) => e.type),
        ["invoice.created", "invoice.completed", "invoice.disputed", "invoice.completed"],
      );
      assert.deepEqual(
        events.map((e) => e.data.invoice!.status),
        ["pending", "completed", "disputed", "completed"],
      );
      assert.deepEqual(events[0]!.data.invoice, invoice, "invoice.created carries the invoice checkout answered");
      assert.deepEqual(events[1]!.data.invoice, afterPayment, "invoice.completed carries the invoice with its new log lines");
      assert.match(events[0]!.id, /^evt_/);
      assert.equal(new Set(events.map((e) => e.id)).size, 4);
    });

    test("a repeated payment changes nothing and writes no event", async () => {
      const { store, invoice } = await paymentSetup(h);
      expectStatus(await paid(h, store.id, invoice.id), 200);
      expectStatus(await paid(h, store.id, invoice.id), 200);
      assert.deepEqual((await allEvents(h, store.key)).map((e) => e.type), ["invoice.created", "invoice.completed"]);
    });

    test("a plugin that errors or times out writes delivery.failed; a rejection writes nothing", async () => {
      const store = await h.store();
      await installPlugin(h, store.id, "broken", `error("boom")`);
      await installPlugin(h, store.id, "strict", `reject("bad signature")`);
      await installPlugin(h, store.id, "nonsense", `return { status = "shipIt" }`);
      const broken = await deliver(h, store.id, "broken", "{}");
      expectStatus(broken, 500);
      expectStatus(await deliver(h, store.id, "strict", "{}"), 401);
      expectStatus(await deliver(h, store.id, "nonsense", "{}"), 500);
      const events = await allEvents(h, store.key);
      assert.deepEqual(events.map((e) => e.type), ["delivery.failed", "delivery.failed"]);
      const d = events[0]!.data.delivery!;
      assert.equal(d.id, broken.headers["x-delivery-id"]);
      assert.equal(d.pluginName, "broken");
      assert.equal(d.outcome, "plugin_error");
      assert.equal(d.status, 500);
      assert.match(JSON.stringify(d.error), /boom/);
      assert.equal(events[1]!.data.delivery!.pluginName, "nonsense");
    });

    test("the feed resumes from its cursor, returns one on an empty page, filters by type, and refuses what it does not know", async () => {
      const { store, invoice } = await paymentSetup(h);
      const first = await feed(h, store.key);
      assert.equal(first.data.events.length, 1);
      const empty = await feed(h, store.key, `?cursor=${first.pagination.nextCursor}`);
      assert.deepEqual(empty.data.events, []);
      assert.equal(empty.pagination.nextCursor, first.pagination.nextCursor, "an empty page keeps the position");
      expectStatus(await paid(h, store.id, invoice.id), 200);
      const next = await feed(h, store.key, `?cursor=${empty.pagination.nextCursor}`);
      assert.deepEqual(next.data.events.map((e) => e.type), ["invoice.completed"]);
      const onlyCompleted = await feed(h, store.key, "?types=invoice.completed,invoice.refunded");
      assert.deepEqual(onlyCompleted.data.events.map((e) => e.type), ["invoice.completed"]);
      for (const bad of ["?cursor=nonsense", "?types=invoice.exploded", "?limit=0", "?since=1"]) {
        const r = await h.get(`/api/service/events${bad}`, store.key);
        expectStatus(r, 400);
      }
    });

    test("the feed needs a key with events:read, which new keys have, and shows only the key's store", async () => {
      const a = await paymentSetup(h);
      const b = await h.store("other");
      expectStatus(await h.get("/api/service/events"), 401);
      const keys = await h.admin("GET", `/api/admin/stores/${a.store.id}/keys`);
      assert.ok(keys.json<{ data: { scopes: string[] }[] }>().data[0]!.scopes.includes("events:read"));
      const narrow = await h.admin("POST", `/api/admin/stores/${a.store.id}/keys`, { scopes: ["invoices:read"] });
      expectStatus(await h.get("/api/service/events", narrow.json<{ key: string }>().key), 403);
      assert.deepEqual((await feed(h, b.key)).data.events, []);
    });

    test("endpoints: the secret is shown once, private and malformed URLs and unknown types are refused", async () => {
      const store = await h.store();
      const ep = await addEndpoint(h, store.id, { url: receiver.url, types: ["invoice.completed"], description: "fulfilment" });
      assert.match(ep.secret, /^whsec_[A-Za-z0-9+/]{32}$/);
      assert.equal(Buffer.from(ep.secret.slice(6), "base64").length, 24);
      const read = await h.admin("GET", `/api/admin/stores/${store.id}/endpoints/${ep.id}`);
      expectStatus(read, 200);
      assert.equal("secret" in read.json(), false);
      assert.deepEqual(read.json<{ types: string[] }>().types, ["invoice.completed"]);
      const list = await h.admin("GET", `/api/admin/stores/${store.id}/endpoints`);
      assert.equal(list.json<{ data: unknown[] }>().data.length, 1);
      assert.equal(list.body.includes(ep.secret), false);
      for (const url of ["http://10.1.2.3/hook", "http://169.254.169.254/latest", "http://[::1]/x", "ftp://example.com/", "http://user:pw@example.com/", "not a url"]) {
        const r = await h.admin("POST", `/api/admin/stores/${store.id}/endpoints`, { url });
        expectStatus(r, 400);
        assert.equal(r.json<{ error: { param: string } }>().error.param, "url", url);
      }
      expectStatus(await h.admin("POST", `/api/admin/stores/${store.id}/endpoints`, { url: receiver.url, types: ["invoice.exploded"] }), 400);
      expectStatus(await h.admin("POST", `/api/admin/stores/st_missing/endpoints`, { url: receiver.url }), 404);
      expectStatus(await h.admin("GET", `/api/admin/stores/${store.id}/endpoints/ep_missing`), 404);
      const patched = await h.app.inject({ method: "PATCH", url: `/api/admin/stores/${store.id}/endpoints/${ep.id}`, headers: { authorization: `Bearer ${"test-admin-token-0123456789"}` }, payload: { types: [], description: "all" } });
      expectStatus(patched, 200);
      assert.deepEqual(patched.json<{ types: string[] }>().types, []);
      expectStatus(await h.admin("DELETE", `/api/admin/stores/${store.id}/endpoints/${ep.id}`), 204);
      expectStatus(await h.admin("DELETE", `/api/admin/stores/${store.id}/endpoints/${ep.id}`), 404);
    });

    test("each event reaches the endpoint signed the Standard Webhooks way, only the types it wants", async () => {
      receiver.received.length = 0;
      receiver.mode = { kind: "ok" };
      const { store, invoice } = await paymentSetup(h);
      const ep = await addEndpoint(h, store.id, { url: receiver.url, types: ["invoice.completed", "invoice.disputed"] });
      expectStatus(await paid(h, store.id, invoice.id), 200);
      expectStatus(await deliverSigned(h, store.id, { type: "dispute", invoiceId: invoice.id }), 200);
      assert.equal(await h.services.dispatcher.runDue(), 2);
      const events = (await allEvents(h, store.key)).filter((e) => e.type !== "invoice.created");
      assert.deepEqual(receiver.verifiedWith(ep.secret).sort(), events.map((e) => e.id).sort());
      for (const m of receiver.received) {
        assert.equal(m.contentType, "application/json");
        assert.match(m.signature, /^v1,[A-Za-z0-9+/]+=*$/);
        assert.ok(Math.abs(Number(m.timestamp) - Date.now() / 1000) < 60);
        const body = JSON.parse(m.body) as Ev;
        assert.deepEqual(body, events.find((e) => e.id === m.id), "the body is the event as the feed shows it");
      }
      assert.deepEqual(receiver.verifiedWith("whsec_" + Buffer.alloc(24, 1).toString("base64")), [], "another secret does not verify");
      const list = await attempts(h, store.id, ep.id);
      assert.deepEqual(list.map((a) => [a.attempt, a.outcome, a.responseStatus, a.responseExcerpt]), [
        [1, "succeeded", 200, "thanks"],
        [1, "succeeded", 200, "thanks"],
      ]);
      assert.equal(await h.services.dispatcher.runDue(), 0, "nothing is sent twice");
      const metrics = (await h.app.inject({ method: "GET", url: "/metrics" })).body;
      assert.match(metrics, /storefront_event_attempts_total\{result="succeeded"\} [2-9]/, "attempts are counted by result, no ids as labels");
      assert.match(metrics, /storefront_event_delivery_lag_seconds_count [2-9]/);
    });

    test("an endpoint remembers the API version it was created under, and its events are rendered and labelled in it", async () => {
      // A test-only older version in which an invoice's totalInUsd was called total.
      const unregister = registerVersion({
        version: "2026-06-01",
        summary: "test only: an invoice's totalInUsd was total",
        transformEvent(event) {
          const invoice = event.data.invoice as Record<string, unknown> | undefined;
          if (invoice !== undefined) {
            invoice.total = invoice.totalInUsd;
            delete invoice.totalInUsd;
          }
          return event;
        },
      });
      try {
        receiver.received.length = 0;
        receiver.mode = { kind: "ok" };
        const { store, invoice } = await paymentSetup(h);
        const old = await addEndpoint(h, store.id, { url: receiver.url, types: ["invoice.completed"], version: "2026-06-01" });
        const current = await addEndpoint(h, store.id, { url: receiver.url, types: ["invoice.completed"] });
        assert.equal((old as unknown as { apiVersion: string }).apiVersion, "2026-06-01");
        assert.equal((current as unknown as { apiVersion: string }).apiVersion, "2026-11-23", "the current version, remembered");
        expectStatus(await h.admin("POST", `/api/admin/stores/${store.id}/endpoints`, { url: receiver.url, version: "1999-01-01" }), 400);
        expectStatus(await paid(h, store.id, invoice.id), 200);
        assert.equal(await h.services.dispatcher.runDue(), 2);
        const byVersion = new Map(receiver.received.map((m) => [m.version, JSON.parse(m.body) as Ev]));
        const oldInvoice = byVersion.get("2026-06-01")!.data.invoice as Record<string, unknown>;
        const newInvoice = byVersion.get("2026-11-23")!.data.invoice as Record<string, unknown>;
        assert.equal(oldInvoice.total, newInvoice.totalInUsd, "renamed for the endpoint pinned to the older version");
        assert.ok(!("totalInUsd" in oldInvoice));
        assert.deepEqual(receiver.verifiedWith(old.secret).length, 1, "the rendered body is what was signed");
        // Moved to the current version by the admin API.
        const moved = await h.app.inject({ method: "PATCH", url: `/api/admin/stores/${store.id}/endpoints/${old.id}`, headers: { authorization: "Bearer test-admin-token-0123456789" }, payload: { version: "2026-11-23" } });
        expectStatus(moved, 200);
        assert.equal(moved.json<{ apiVersion: string }>().apiVersion, "2026-11-23");
      } finally {
        unregister();
      }
    });

    test("receiver down, then 500, then hanging, then back: retried on the schedule with the same webhook-id", async () => {
      receiver.received.length = 0;
      const { store, invoice } = await paymentSetup(h);
      const ep = await addEndpoint(h, store.id, { url: receiver.url, types: ["invoice.completed"] });
      await receiver.down();
      expectStatus(await paid(h, store.id, invoice.id), 200);
      assert.equal(await h.services.dispatcher.runDue(), 1);
      assert.equal(await h.services.dispatcher.runDue(), 0, "not due again before 5 s");
      await receiver.start();
      receiver.mode = { kind: "status", status: 500 };
      h.clock.advance(RETRY_SCHEDULE_MS[0]! - 1);
      assert.equal(await h.services.dispatcher.runDue(), 0, "still 1 ms early");
      h.clock.advance(1);
      assert.equal(await h.services.dispatcher.runDue(), 1);
      receiver.mode = { kind: "hang" };
      h.clock.advance(RETRY_SCHEDULE_MS[1]!);
      assert.equal(await h.services.dispatcher.runDue(), 1);
      receiver.mode = { kind: "ok" };
      h.clock.advance(RETRY_SCHEDULE_MS[2]!);
      assert.equal(await h.services.dispatcher.runDue(), 1);
      h.clock.advance(RETRY_SCHEDULE_MS[3]!);
      assert.equal(await h.services.dispatcher.runDue(), 0, "done after the success");

      const list = await attempts(h, store.id, ep.id);
      assert.deepEqual(list.map((a) => [a.attempt, a.outcome, a.responseStatus]), [
        [1, "failed", null],
        [2, "failed", 500],
        [3, "failed", null],
        [4, "succeeded", 200],
      ]);
      assert.match(list[0]!.error!, /ECONNREFUSED|refused/i);
      assert.match(list[1]!.responseExcerpt, /status 500/);
      assert.match(list[2]!.error!, /no answer within 400 ms/);
      const completed = (await allEvents(h, store.key)).find((e) => e.type === "invoice.completed")!;
      assert.deepEqual(receiver.received.map((m) => m.id), [completed.id, completed.id, completed.id], "500, hang and success carry one id");
      assert.deepEqual(receiver.verifiedWith(ep.secret), [completed.id, completed.id, completed.id]);
      const endpoint = await h.admin("GET", `/api/admin/stores/${store.id}/endpoints/${ep.id}`);
      assert.equal(endpoint.json<{ enabled: boolean }>().enabled, true);
    });

    test("an answer of any bytes (NUL, invalid UTF-8, megabytes) is recorded as a text excerpt", async () => {
      receiver.mode = { kind: "status", status: 500, body: Buffer.concat([Buffer.from("bad\u0000answer \xff\xfe"), Buffer.alloc(2 * 1024 * 1024, 0x41)]) };
      const { store, invoice } = await paymentSetup(h);
      const ep = await addEndpoint(h, store.id, { url: receiver.url, types: ["invoice.completed"] });
      expectStatus(await paid(h, store.id, invoice.id), 200);
      assert.equal(await h.services.dispatcher.runDue(), 1);
      const [a] = await attempts(h, store.id, ep.id);
      assert.equal(a!.responseStatus, 500);
      assert.ok(a!.responseExcerpt.startsWith("badanswer"), a!.responseExcerpt.slice(0, 40));
      assert.ok(a!.responseExcerpt.length <= 1024);
      receiver.mode = { kind: "ok" };
      // Its retry must not fall due in the next test, which moves the clock.
      expectStatus(await h.admin("DELETE", `/api/admin/stores/${store.id}/endpoints/${ep.id}`), 204);
    });

    test("after the last retry the series has failed: eight attempts in all", async () => {
      receiver.mode = { kind: "status", status: 503 };
      const { store, invoice } = await paymentSetup(h);
      const ep = await addEndpoint(h, store.id, { url: receiver.url, types: ["invoice.completed"] });
      expectStatus(await paid(h, store.id, invoice.id), 200);
      assert.equal(await h.services.dispatcher.runDue(), 1);
      for (const wait of RETRY_SCHEDULE_MS) {
        h.clock.advance(wait);
        assert.equal(await h.services.dispatcher.runDue(), 1);
      }
      h.clock.advance(86_400_000);
      assert.equal(await h.services.dispatcher.runDue(), 0);
      const list = await attempts(h, store.id, ep.id);
      assert.equal(list.length, 8);
      assert.deepEqual(list.map((a) => a.outcome), [...Array<string>(7).fill("failed"), "exhausted"]);
      receiver.mode = { kind: "ok" };
    });

    test("410 Gone disables the endpoint at once and cancels what was queued for it", async () => {
      receiver.mode = { kind: "status", status: 410 };
      const { store, invoice, customer } = await paymentSetup(h);
      const ep = await addEndpoint(h, store.id, { url: receiver.url });
      const second = await h.checkout(store.id, { customerId: customer.id, paymentMethod: "card", items: [{ productVariantId: "v", quantity: 1, price: 1 }] });
      expectStatus(await paid(h, store.id, invoice.id), 200);
      const made = await h.services.dispatcher.runDue();
      assert.ok(made >= 1);
      const endpoint = (await h.admin("GET", `/api/admin/stores/${store.id}/endpoints/${ep.id}`)).json<{ enabled: boolean; disabledReason: string }>();
      assert.equal(endpoint.enabled, false);
      assert.match(endpoint.disabledReason, /410/);
      h.clock.advance(86_400_000);
      expectStatus(await paid(h, store.id, second.id), 200);
      assert.equal(await h.services.dispatcher.runDue(), 0, "a disabled endpoint gets nothing new");
      assert.ok((await attempts(h, store.id, ep.id)).some((a) => a.outcome === "gone" && a.responseStatus === 410));
      // Enabled again by the merchant, it receives new events.
      receiver.mode = { kind: "ok" };
      const re = await h.app.inject({ method: "PATCH", url: `/api/admin/stores/${store.id}/endpoints/${ep.id}`, headers: { authorization: "Bearer test-admin-token-0123456789" }, payload: { enabled: true } });
      expectStatus(re, 200);
      assert.equal(re.json<{ enabled: boolean; disabledReason: string | null }>().disabledReason, null);
      expectStatus(await deliverSigned(h, store.id, { type: "dispute", invoiceId: second.id }), 200);
      assert.equal(await h.services.dispatcher.runDue(), 1);
    });

    test("an endpoint with no success for five days is disabled", async () => {
      receiver.mode = { kind: "status", status: 500 };
      const store = await h.store();
      const customer = await h.customer(store.id);
      const ep = await addEndpoint(h, store.id, { url: receiver.url, types: ["invoice.created"] });
      const checkout = () => h.checkout(store.id, { customerId: customer.id, paymentMethod: "card", items: [{ productVariantId: "v", quantity: 1, price: 1 }] });
      await checkout();
      await h.services.dispatcher.runDue();
      for (let day = 1; day <= 4; day++) {
        h.clock.advance(86_400_000);
        await checkout();
        await h.services.dispatcher.runDue();
      }
      let endpoint = (await h.admin("GET", `/api/admin/stores/${store.id}/endpoints/${ep.id}`)).json<{ enabled: boolean; disabledReason: string | null }>();
      assert.equal(endpoint.enabled, true, "four days of failures are not five");
      h.clock.advance(86_400_000);
      await checkout();
      await h.services.dispatcher.runDue();
      endpoint = (await h.admin("GET", `/api/admin/stores/${store.id}/endpoints/${ep.id}`)).json<{ enabled: boolean; disabledReason: string | null }>();
      assert.equal(endpoint.enabled, false);
      assert.match(endpoint.disabledReason!, /5 days/);
      receiver.mode = { kind: "ok" };
    });

    test("rotation: both secrets sign for 24 hours, then only the new one", async () => {
      receiver.mode = { kind: "ok" };
      receiver.received.length = 0;
      const store = await h.store();
      const customer = await h.customer(store.id);
      const ep = await addEndpoint(h, store.id, { url: receiver.url });
      const rotated = await h.admin("POST", `/api/admin/stores/${store.id}/endpoints/${ep.id}/rotate-secret`);
      expectStatus(rotated, 200);
      const { secret: fresh, previousSecretExpiresAt } = rotated.json<{ secret: string; previousSecretExpiresAt: string }>();
      assert.notEqual(fresh, ep.secret);
      assert.equal(Date.parse(previousSecretExpiresAt), h.clock.now() + 86_400_000);
      await h.checkout(store.id, { customerId: customer.id, paymentMethod: "card", items: [{ productVariantId: "v", quantity: 1, price: 1 }] });
      await h.services.dispatcher.runDue();
      assert.equal(receiver.received.length, 1);
      assert.equal(receiver.received[0]!.signature.split(" ").length, 2);
      assert.deepEqual(receiver.verifiedWith(ep.secret), [receiver.received[0]!.id], "the old secret verifies during the overlap");
      assert.deepEqual(receiver.verifiedWith(fresh), [receiver.received[0]!.id], "so does the new one");
      h.clock.advance(86_400_000 + 1);
      await h.checkout(store.id, { customerId: customer.id, paymentMethod: "card", items: [{ productVariantId: "v", quantity: 1, price: 1 }] });
      await h.services.dispatcher.runDue();
      assert.equal(receiver.received[1]!.signature.split(" ").length, 1);
      assert.deepEqual(receiver.verifiedWith(ep.secret), [receiver.received[0]!.id], "the old secret no longer signs");
      assert.equal(receiver.verifiedWith(fresh).length, 2);
    });

    test("any event can be sent again by hand, with the same webhook-id", async () => {
      receiver.mode = { kind: "ok" };
      receiver.received.length = 0;
      const { store, invoice } = await paymentSetup(h);
      const ep = await addEndpoint(h, store.id, { url: receiver.url, types: ["invoice.completed"] });
      const created = (await allEvents(h, store.key))[0]!; // invoice.created, before the endpoint existed
      const r: LightMyRequestResponse = await h.admin("POST", `/api/admin/stores/${store.id}/events/${created.id}/resend`, { endpointId: ep.id });
      expectStatus(r, 202);
      assert.equal(r.json<{ deliveries: unknown[] }>().deliveries.length, 1);
      expectStatus(await paid(h, store.id, invoice.id), 200);
      await h.services.dispatcher.runDue();
      const completed = (await allEvents(h, store.key))[1]!;
      expectStatus(await h.admin("POST", `/api/admin/stores/${store.id}/events/${completed.id}/resend`, {}), 202);
      await h.services.dispatcher.runDue();
      assert.deepEqual(receiver.verifiedWith(ep.secret).sort(), [created.id, completed.id, completed.id].sort());
      expectStatus(await h.admin("POST", `/api/admin/stores/${store.id}/events/evt_missing/resend`, {}), 404);
      const one = await h.admin("GET", `/api/admin/stores/${store.id}/events/${completed.id}`);
      expectStatus(one, 200);
      assert.deepEqual(one.json(), completed);
    });

    test("a hanging endpoint does not hold up another endpoint's deliveries", async () => {
      const slow = await startReceiver();
      slow.mode = { kind: "hang" };
      receiver.mode = { kind: "ok" };
      receiver.received.length = 0;
      try {
        const { store, invoice } = await paymentSetup(h);
        await addEndpoint(h, store.id, { url: slow.url });
        await addEndpoint(h, store.id, { url: receiver.url });
        h.services.dispatcher.start();
        expectStatus(await paid(h, store.id, invoice.id), 200);
        await receiver.waitFor(1, 5000);
        // An order, not a time: when the fast endpoint got its event, the slow one's attempt had not ended (its
        // request not sent yet, or still held open), as it would have if the dispatcher had waited for it.
        assert.equal(slow.received.length - slow.hanging, 0, "the slow endpoint's attempt was still open when the fast one was served");
      } finally {
        await h.services.dispatcher.stop();
        await slow.close();
      }
    });
  });
}

for (const { name: dialect, skip } of DIALECTS) {
  describe(`endpoint address policy on ${dialect}`, { skip }, () => {
    test("a name that resolves to a private address is refused when it is resolved, attempt recorded, nothing received", async () => {
      // No ENDPOINT_ALLOW: loopback is private. "localhost" passes the save-time check (it is not an IP
      // literal), so the check of the addresses it resolves to stops it (test/events.endpoint-policy.test.ts).
      const h = await createHarness(dialect, {}, { dispatch: { timeoutMs: 2000 } });
      const receiver = await startReceiver();
      try {
        const store = await h.store();
        const refused = await h.admin("POST", `/api/admin/stores/${store.id}/endpoints`, { url: receiver.url });
        expectStatus(refused, 400);
        const ep = await addEndpoint(h, store.id, { url: `http://localhost:${receiver.port}/hooks` });
        const customer = await h.customer(store.id);
        await h.checkout(store.id, { customerId: customer.id, paymentMethod: "card", items: [{ productVariantId: "v", quantity: 1, price: 1 }] });
        assert.equal(await h.services.dispatcher.runDue(), 1);
        const [a] = await attempts(h, store.id, ep.id);
        assert.equal(a!.outcome, "failed");
        assert.equal(a!.responseStatus, null);
        assert.match(a!.error!, /private or reserved/);
        assert.equal(receiver.received.length, 0);
      } finally {
        await receiver.close();
        await h.close();
      }
    });

    test("PATCH without a body is a 400, resend to a disabled endpoint a 409", async () => {
      const h = await createHarness(dialect, { ENDPOINT_ALLOW: "127.0.0.0/8" });
      try {
        const store = await h.store();
        const ep = await addEndpoint(h, store.id, { url: "http://127.0.0.1:9/x", enabled: false });
        const patch = await h.app.inject({ method: "PATCH", url: `/api/admin/stores/${store.id}/endpoints/${ep.id}`, headers: { authorization: "Bearer test-admin-token-0123456789" } });
        expectStatus(patch, 400);
        const customer = await h.customer(store.id);
        await h.checkout(store.id, { customerId: customer.id, paymentMethod: "card", items: [{ productVariantId: "v", quantity: 1, price: 1 }] });
        const [event] = (await feed(h, store.key)).data.events;
        expectStatus(await h.admin("POST", `/api/admin/stores/${store.id}/events/${event!.id}/resend`, { endpointId: ep.id }), 409);
        const all = await h.admin("POST", `/api/admin/stores/${store.id}/events/${event!.id}/resend`);
        expectStatus(all, 202);
        assert.deepEqual(all.json<{ deliveries: unknown[] }>().deliveries, [], "a disabled endpoint gets nothing");
        expectStatus(await h.get("/api/admin/stores/x/endpoints", null, { authorization: "Bearer wrong" }), 401);
      } finally {
        await h.close();
      }
    });
  });
}
