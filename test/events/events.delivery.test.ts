// Events reaching endpoints, on SQLite and PostgreSQL: signed the Standard Webhooks way (checked with the
// official library) in the endpoint's API version, retried on the contract's schedule (driven by the test
// clock) with one webhook-id, any answer recorded as a text excerpt, the series failed after eight
// attempts, 410 and five days without success disabling an endpoint, and a hanging endpoint holding up
// no other.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { RETRY_SCHEDULE_MS } from "../../src/events/event-dispatcher.ts";
import { registerVersion } from "../../src/versioning/registry.ts";
import { createHarness, DIALECTS, expectStatus, type Harness } from "../helpers/harness.ts";
import { addEndpoint, allEvents, attempts, paid, type Ev } from "../helpers/events.ts";
import { startReceiver, type Receiver } from "../helpers/receiver.ts";
import { deliverSigned, paymentSetup } from "../helpers/webhook.ts";

for (const { name: dialect, skip } of DIALECTS) {
  describe(`events delivered on ${dialect}`, { skip }, () => {
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

    test("each event reaches the endpoint signed the Standard Webhooks way, only the types it wants", async () => {
      receiver.received.length = 0;
      receiver.mode = { kind: "ok" };
      const { store, invoice } = await paymentSetup(h);
      const ep = await addEndpoint(h, store.id, { url: receiver.url, types: ["invoice.completed", "invoice.disputed"] });
      expectStatus(await paid(h, store.id, invoice.id), 200);
      expectStatus(await deliverSigned(h, store.id, { type: "dispute", invoiceId: invoice.id }), 200);
      // The signing time is the wall clock at sending: between these two readings (an order, not a tolerance).
      const sendingFrom = Math.floor(Date.now() / 1000);
      assert.equal(await h.services.dispatcher.runDue(), 2);
      const sentBy = Math.floor(Date.now() / 1000);
      const events = (await allEvents(h, store.key)).filter((e) => e.type !== "invoice.created");
      assert.deepEqual(receiver.verifiedWith(ep.secret).sort(), events.map((e) => e.id).sort());
      for (const m of receiver.received) {
        assert.equal(m.contentType, "application/json");
        assert.match(m.signature, /^v1,[A-Za-z0-9+/]+=*$/);
        assert.ok(Number(m.timestamp) >= sendingFrom && Number(m.timestamp) <= sentBy, `webhook-timestamp ${m.timestamp} not within ${sendingFrom}..${sentBy}`);
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
