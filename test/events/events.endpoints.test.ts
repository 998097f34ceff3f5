// Event endpoints on SQLite and PostgreSQL: the secret shown once, private and malformed URLs refused,
// rotation (both secrets sign for 24 hours), resend by hand with the same webhook-id, and the address
// policy checked when a name is resolved.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import type { LightMyRequestResponse } from "fastify";
import { createHarness, DIALECTS, expectStatus, type Harness } from "../helpers/harness.ts";
import { addEndpoint, allEvents, attempts, feed, paid } from "../helpers/events.ts";
import { startReceiver, type Receiver } from "../helpers/receiver.ts";
import { paymentSetup } from "../helpers/webhook.ts";

for (const { name: dialect, skip } of DIALECTS) {
  describe(`event endpoints on ${dialect}`, { skip }, () => {
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
  });
}

for (const { name: dialect, skip } of DIALECTS) {
  describe(`endpoint address policy on ${dialect}`, { skip }, () => {
    test("a name that resolves to a private address is refused when it is resolved, attempt recorded, nothing received", async () => {
      // No ENDPOINT_ALLOW: loopback is private. "localhost" passes the save-time check (it is not an IP
      // literal), so the check of the addresses it resolves to stops it (test/events/events.endpoint-policy.test.ts).
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
