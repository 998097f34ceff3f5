// Attempts of outbound webhooks on SQLite and PostgreSQL: counted in the metrics with the words their
// records use, an example sent to an endpoint on demand, and a manual resend of an event that is still to be sent (a retry scheduled, or not sent
// yet) sends it once, not twice.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { RETRY_SCHEDULE_MS } from "../../src/events/event-dispatcher.ts";
import { createHarness, DIALECTS, expectStatus, type Harness } from "../helpers/harness.ts";
import { startReceiver, type Receiver } from "../helpers/receiver.ts";
import { deliverSigned, paymentSetup } from "../helpers/webhook.ts";

type Attempt = { eventId: string; attempt: number; outcome: string; responseStatus: number | null; error: string | null };

async function addEndpoint(h: Harness, storeId: string, body: Record<string, unknown>) {
  const r = await h.admin("POST", `/api/admin/stores/${storeId}/endpoints`, body);
  expectStatus(r, 201);
  return r.json<{ id: string; secret: string }>();
}

async function attempts(h: Harness, storeId: string, endpointId: string): Promise<Attempt[]> {
  const r = await h.admin("GET", `/api/admin/stores/${storeId}/endpoints/${endpointId}/attempts`);
  expectStatus(r, 200);
  return r.json<{ data: Attempt[] }>().data.reverse(); // oldest first
}

/** storefront_event_attempts_total by its result label, as /metrics shows it now. */
async function attemptCounts(h: Harness): Promise<Record<string, number>> {
  const text = (await h.app.inject({ method: "GET", url: "/metrics" })).body;
  return Object.fromEntries([...text.matchAll(/^storefront_event_attempts_total\{result="([a-z_]+)"\} (\d+)$/gm)].map((m) => [m[1]!, Number(m[2])]));
}

const paid = (h: Harness, storeId: string, invoiceId: string) => deliverSigned(h, storeId, { type: "paid", invoiceId });

/** The id of the store's event of `type` (the admin listing). */
async function eventOf(h: Harness, storeId: string, type: string): Promise<string> {
  const r = await h.admin("GET", `/api/admin/stores/${storeId}/events?types=${type}`);
  expectStatus(r, 200);
  return r.json<{ data: { id: string }[] }>().data[0]!.id;
}

for (const { name: dialect, skip } of DIALECTS) {
  describe(`webhook attempts on ${dialect}`, { skip }, () => {
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

    test("the metrics count attempts with the attempt records' words: succeeded, rejected (another status), no_answer", async () => {
      receiver.received.length = 0;
      const before = await attemptCounts(h);
      const { store, invoice } = await paymentSetup(h);
      const ep = await addEndpoint(h, store.id, { url: receiver.url, types: ["invoice.completed"] });
      await receiver.down();
      expectStatus(await paid(h, store.id, invoice.id), 200);
      assert.equal(await h.services.dispatcher.runDue(), 1);
      await receiver.start();
      receiver.mode = { kind: "status", status: 500 };
      h.clock.advance(RETRY_SCHEDULE_MS[0]!);
      assert.equal(await h.services.dispatcher.runDue(), 1);
      receiver.mode = { kind: "ok" };
      h.clock.advance(RETRY_SCHEDULE_MS[1]!);
      assert.equal(await h.services.dispatcher.runDue(), 1);
      const list = await attempts(h, store.id, ep.id);
      assert.deepEqual(list.map((a) => [a.outcome, a.responseStatus === null ? "no answer" : a.responseStatus]), [
        ["failed", "no answer"],
        ["failed", 500],
        ["succeeded", 200],
      ]);
      const after = await attemptCounts(h);
      const delta = (result: string) => (after[result] ?? 0) - (before[result] ?? 0);
      assert.deepEqual({ succeeded: delta("succeeded"), rejected: delta("rejected"), no_answer: delta("no_answer") }, { succeeded: 1, rejected: 1, no_answer: 1 });
      assert.deepEqual(Object.keys(after).sort(), ["no_answer", "rejected", "succeeded"], "no other result label");
    });

    test("POST …/endpoints/{id}/test sends a signed example now and answers what the endpoint said; not an attempt, not an event", async () => {
      receiver.received.length = 0;
      receiver.mode = { kind: "ok" };
      const { store } = await paymentSetup(h);
      const ep = await addEndpoint(h, store.id, { url: receiver.url, types: ["invoice.completed"], enabled: false });
      const r = await h.admin("POST", `/api/admin/stores/${store.id}/endpoints/${ep.id}/test`, { type: "delivery.failed" });
      expectStatus(r, 200);
      const sent = r.json<{ eventId: string; ok: boolean; responseStatus: number; type: string }>();
      assert.deepEqual([sent.ok, sent.responseStatus, sent.type], [true, 200, "delivery.failed"], "any type, to a disabled endpoint too");
      assert.deepEqual(receiver.verifiedWith(ep.secret), [sent.eventId]);
      assert.deepEqual(await attempts(h, store.id, ep.id), []);
      expectStatus(await h.admin("GET", `/api/admin/stores/${store.id}/events/${sent.eventId}`), 404);
      expectStatus(await h.admin("POST", `/api/admin/stores/${store.id}/endpoints/${ep.id}/test`), 200);
      expectStatus(await h.admin("POST", `/api/admin/stores/${store.id}/endpoints/${ep.id}/test`, { type: "invoice.exploded" }), 400);
      expectStatus(await h.admin("POST", `/api/admin/stores/${store.id}/endpoints/ep_missing/test`, {}), 404);
    });

    test("a resend while the delivery waits for its retry sends it now, once; the retry does not send it again", async () => {
      receiver.received.length = 0;
      receiver.mode = { kind: "status", status: 500 };
      const { store, invoice } = await paymentSetup(h);
      const ep = await addEndpoint(h, store.id, { url: receiver.url, types: ["invoice.completed"] });
      expectStatus(await paid(h, store.id, invoice.id), 200);
      assert.equal(await h.services.dispatcher.runDue(), 1, "the first attempt, answered 500");
      receiver.mode = { kind: "ok" };
      const completed = await eventOf(h, store.id, "invoice.completed");
      const resent = await h.admin("POST", `/api/admin/stores/${store.id}/events/${completed}/resend`, {});
      expectStatus(resent, 202);
      assert.equal(resent.json<{ deliveries: unknown[] }>().deliveries.length, 1);
      assert.equal(await h.services.dispatcher.runDue(), 1, "sent now, before its retry time");
      for (const wait of RETRY_SCHEDULE_MS) {
        h.clock.advance(wait);
        assert.equal(await h.services.dispatcher.runDue(), 0, "nothing left to send");
      }
      assert.deepEqual(receiver.verifiedWith(ep.secret), [completed, completed], "the 500, then the resend; no third");
      // Both at the test clock's one instant: in the attempt's order.
      assert.deepEqual((await attempts(h, store.id, ep.id)).sort((a, b) => a.attempt - b.attempt).map((a) => [a.attempt, a.outcome]), [
        [1, "failed"],
        [2, "succeeded"],
      ]);
    });

    test("a resend before the first attempt, and two resends in a row, queue the event once per endpoint", async () => {
      receiver.received.length = 0;
      receiver.mode = { kind: "ok" };
      const { store, invoice } = await paymentSetup(h);
      const ep = await addEndpoint(h, store.id, { url: receiver.url, types: ["invoice.completed"] });
      expectStatus(await paid(h, store.id, invoice.id), 200);
      const completed = await eventOf(h, store.id, "invoice.completed");
      const first = await h.admin("POST", `/api/admin/stores/${store.id}/events/${completed}/resend`, {});
      const second = await h.admin("POST", `/api/admin/stores/${store.id}/events/${completed}/resend`, { endpointId: ep.id });
      expectStatus(first, 202);
      expectStatus(second, 202);
      assert.deepEqual(second.json<{ deliveries: unknown[] }>().deliveries, first.json<{ deliveries: unknown[] }>().deliveries, "the same pending delivery");
      assert.equal(await h.services.dispatcher.runDue(), 1);
      assert.deepEqual(receiver.verifiedWith(ep.secret), [completed]);
      const again = await h.admin("POST", `/api/admin/stores/${store.id}/events/${completed}/resend`, {});
      expectStatus(again, 202);
      assert.equal(await h.services.dispatcher.runDue(), 1, "delivered before: a resend sends it again");
      assert.deepEqual(receiver.verifiedWith(ep.secret), [completed, completed]);
    });
  });
}
