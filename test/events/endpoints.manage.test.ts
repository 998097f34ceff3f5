// Endpoints managed at Svix's level (issue 31), on both databases: reveal the signing secret (and the
// previous one during a rotation), send a test event and see the receiver's status, headers and body,
// each attempt's response headers and body, and recover the deliveries that failed since a time.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { sql } from "kysely";
import { createHarness, DIALECTS, expectStatus, type Harness } from "../helpers/harness.ts";
import { startReceiver, type Receiver } from "../helpers/receiver.ts";

type Json = Record<string, unknown>;

for (const { name: dialect, skip } of DIALECTS) {
  describe(`endpoint management on ${dialect}`, { skip }, () => {
    let h: Harness;
    let receiver: Receiver;
    let store: { id: string; key: string };
    const path = (endpointId: string, tail = "") => `/api/admin/stores/${store.id}/endpoints/${endpointId}${tail}`;
    const addEndpoint = async (body: Json = {}) => {
      const r = await h.admin("POST", `/api/admin/stores/${store.id}/endpoints`, { url: receiver.url, ...body });
      expectStatus(r, 201);
      return r.json<{ id: string; secret: string }>();
    };
    before(async () => {
      h = await createHarness(dialect, { ENDPOINT_ALLOW: "127.0.0.1" }, { dispatch: { timeoutMs: 400 } });
      receiver = await startReceiver();
      store = await h.store();
    });
    after(async () => {
      await receiver.close();
      await h.close();
    });

    test("an event's deliveries get ids that sort by the event's time: edl_, 12 hexadecimal characters of its milliseconds, 16 random", async () => {
      const ep = await addEndpoint();
      const customer = await h.customer(store.id);
      for (let i = 0; i < 3; i++) {
        const invoice = await h.checkout(store.id, { customerId: customer.id, paymentMethod: "card", items: [{ productVariantId: "v", quantity: 1, price: 5 }] });
        h.clock.advance(1_000);
        expectStatus(await h.admin("POST", `/api/admin/stores/${store.id}/invoices/${invoice.id}/cancel`, {}), 200);
      }
      // Each invoice's creation and cancellation, a second apart: six events, one delivery each.
      const rows = await h.services.db.kysely.selectFrom("event_deliveries").select(["id", "created_at", "event_id"]).where("endpoint_id", "=", ep.id).orderBy("id").execute();
      assert.equal(rows.length, 6);
      for (const r of rows) {
        assert.match(r.id, /^edl_[0-9a-f]{28}$/);
        assert.equal(parseInt(r.id.slice(4, 16), 16), Number(r.created_at), "the time part is the event's");
      }
      const times = rows.map((r) => Number(r.created_at));
      assert.deepEqual(times, [...times].sort((a, b) => a - b), "in id order as in time order");
      assert.equal(new Set(rows.map((r) => r.id.slice(16))).size, 6, "the random parts differ");
      // One queued by hand (a resend to an endpoint added since) has the same shape, with the time it was queued.
      const second = await addEndpoint();
      const resent = await h.admin("POST", `/api/admin/stores/${store.id}/events/${rows[0]!.event_id}/resend`, { endpointId: second.id });
      expectStatus(resent, 202);
      const queued = resent.json<{ deliveries: { id: string }[] }>().deliveries;
      assert.equal(queued.length, 1);
      assert.match(queued[0]!.id, /^edl_[0-9a-f]{28}$/);
      assert.equal(parseInt(queued[0]!.id.slice(4, 16), 16), h.clock.now());
      for (const id of [ep.id, second.id]) await h.app.inject({ method: "PATCH", url: path(id), headers: { authorization: "Bearer test-admin-token-0123456789" }, payload: { enabled: false } });
    });

    test("reveal shows the signing secret, and during a rotation the previous one that still signs", async () => {
      const ep = await addEndpoint();
      const shown = await h.admin("GET", path(ep.id, "/secret"));
      expectStatus(shown, 200);
      assert.deepEqual(shown.json(), { id: ep.id, secret: ep.secret, previousSecret: null, previousSecretExpiresAt: null });
      const rotated = (await h.admin("POST", path(ep.id, "/rotate-secret"))).json<{ secret: string; previousSecretExpiresAt: string }>();
      const after = (await h.admin("GET", path(ep.id, "/secret"))).json<Json>();
      assert.deepEqual(after, { id: ep.id, secret: rotated.secret, previousSecret: ep.secret, previousSecretExpiresAt: rotated.previousSecretExpiresAt });
      expectStatus(await h.admin("GET", path("ep_nope", "/secret")), 404);
    });

    test("a test event is signed with the endpoint's secret, sent now, and answered with the receiver's status, headers and body", async () => {
      const ep = await addEndpoint({ types: ["invoice.completed"] });
      receiver.received.length = 0;
      receiver.mode = { kind: "status", status: 500, body: Buffer.from("receiver exploded: stack trace here") };
      const r = await h.admin("POST", path(ep.id, "/test"), { type: "invoice.refunded" });
      expectStatus(r, 200);
      const sent = r.json<{ eventId: string; responseStatus: number; responseHeaders: Record<string, string>; responseExcerpt: string; error: string | null }>();
      assert.equal(sent.responseStatus, 500);
      assert.equal(sent.responseExcerpt, "receiver exploded: stack trace here");
      assert.equal(sent.responseHeaders["content-type"], "text/plain");
      assert.match(sent.eventId, /^evt_/);
      assert.deepEqual(receiver.verifiedWith(ep.secret), [sent.eventId], "signed with the endpoint's secret");
      const event = JSON.parse(receiver.received[0]!.body) as { type: string; data: { invoice: { status: string } } };
      assert.equal(event.type, "invoice.refunded");
      assert.equal(event.data.invoice.status, "refunded");
      const feed = await h.get("/api/service/events", store.key);
      assert.ok(!feed.body.includes(sent.eventId), "a test event is not in the store's feed");
      expectStatus(await h.admin("POST", path(ep.id, "/test"), { type: "invoice.exploded" }), 400);
      receiver.mode = { kind: "ok" };
    });

    test("a failed attempt keeps the receiver's status, headers and body", async () => {
      const ep = await addEndpoint({ types: ["invoice.created"] });
      receiver.mode = { kind: "status", status: 500, body: Buffer.from('{"error":"database down"}') };
      const customer = await h.customer(store.id);
      await h.checkout(store.id, { customerId: customer.id, paymentMethod: "card", items: [{ productVariantId: "v", quantity: 1, price: 5 }] });
      assert.ok((await h.services.dispatcher.runDue()) >= 1);
      const attempts = (await h.admin("GET", path(ep.id, "/attempts"))).json<{ data: { responseStatus: number; responseExcerpt: string; responseHeaders: Record<string, string> }[] }>().data;
      assert.equal(attempts[0]!.responseStatus, 500);
      assert.equal(attempts[0]!.responseExcerpt, '{"error":"database down"}');
      assert.equal(attempts[0]!.responseHeaders["content-type"], "text/plain");
      receiver.mode = { kind: "ok" };
    });

    test("recover queues again the events whose delivery failed since the given time, once, and only to an enabled endpoint", async () => {
      const ep = await addEndpoint({ types: ["invoice.cancelled"] });
      const customer = await h.customer(store.id);
      const invoice = await h.checkout(store.id, { customerId: customer.id, paymentMethod: "card", items: [{ productVariantId: "v", quantity: 1, price: 5 }] });
      expectStatus(await h.admin("POST", `/api/admin/stores/${store.id}/invoices/${invoice.id}/cancel`, {}), 200);
      // The retries ran out: the delivery failed for good (the schedule itself is tested in events.delivery.test.ts).
      await sql`update event_deliveries set status = 'failed' where endpoint_id = ${ep.id}`.execute(h.services.db.kysely);
      const early = await h.admin("POST", path(ep.id, "/recover"), { since: new Date(h.clock.now() + 60_000).toISOString() });
      assert.deepEqual(early.json(), { recovered: 0, more: false }, "nothing failed after that time");
      const r = await h.admin("POST", path(ep.id, "/recover"), { since: new Date(h.clock.now() - 60_000).toISOString() });
      expectStatus(r, 202);
      assert.deepEqual(r.json(), { recovered: 1, more: false });
      assert.deepEqual((await h.admin("POST", path(ep.id, "/recover"), { since: "2000-01-01T00:00:00Z" })).json(), { recovered: 0, more: false }, "already queued again");
      assert.ok((await h.services.dispatcher.runDue()) >= 1);
      const attempts = (await h.admin("GET", path(ep.id, "/attempts"))).json<{ data: { outcome: string }[] }>().data;
      assert.deepEqual(attempts.map((a) => a.outcome), ["succeeded"], "sent again, and delivered");
      await h.app.inject({ method: "PATCH", url: path(ep.id), headers: { authorization: "Bearer test-admin-token-0123456789" }, payload: { enabled: false } });
      expectStatus(await h.admin("POST", path(ep.id, "/recover"), { since: "2000-01-01T00:00:00Z" }), 409);
    });
  });
}
