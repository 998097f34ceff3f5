// The delivery log searched by the provider's event (issue 31), on both databases: each delivery carries
// the event id (the plugin's eventId, else the JSON body's id) and type (the body's `type`, `event_type`
// or `event.type`) as columns, the list filters by them, and `total=true` counts what matches.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { createHarness, DIALECTS, expectStatus, type Harness } from "../helpers/harness.ts";
import { deliver, installPlugin } from "../helpers/webhook.ts";

type Summary = { id: string; eventId: string | null; eventType: string | null };
type Page = { data: Summary[]; pagination: { nextCursor: string | null; total?: number; totalCapped?: boolean } };

/** Ignores everything; returns the body's `ref` as its eventId when there is one. */
const PLUGIN = `local e = request.json
return { status = "ignore", eventId = type(e) == "table" and e.ref or nil }`;

for (const { name: dialect, skip } of DIALECTS) {
  describe(`delivery search by event on ${dialect}`, { skip }, () => {
    let h: Harness;
    let store: { id: string };
    const list = async (query: string) => {
      const r = await h.admin("GET", `/api/admin/stores/${store.id}/deliveries${query}`);
      expectStatus(r, 200);
      return r.json<Page>();
    };
    before(async () => {
      h = await createHarness(dialect);
      store = await h.store();
      await installPlugin(h, store.id, "ev", PLUGIN, {});
      const bodies = [
        { id: "evt_stripe_1", type: "checkout.session.completed" },
        { id: "evt_stripe_2", type: "charge.dispute.created", ref: "evt_from_plugin" },
        { id: "WH-1", event_type: "PAYMENT.CAPTURE.COMPLETED" },
        { id: "delivery-7", event: { id: "cb_evt_1", type: "charge:confirmed" } },
        { id: "evt_stripe_3", type: "checkout.session.completed" },
      ];
      for (const b of bodies) {
        h.clock.advance(1000);
        expectStatus(await deliver(h, store.id, "ev", JSON.stringify(b)), 200);
      }
      h.clock.advance(1000);
      expectStatus(await deliver(h, store.id, "ev", "not json at all"), 200);
    });
    after(() => h.close());

    test("each delivery shows the provider's event id and type: the plugin's eventId wins over the body's id", async () => {
      const rows = (await list("")).data.reverse();
      assert.deepEqual(
        rows.map((r) => [r.eventId, r.eventType]),
        [
          ["evt_stripe_1", "checkout.session.completed"],
          ["evt_from_plugin", "charge.dispute.created"],
          ["WH-1", "PAYMENT.CAPTURE.COMPLETED"],
          ["delivery-7", "charge:confirmed"],
          ["evt_stripe_3", "checkout.session.completed"],
          [null, null],
        ],
      );
    });

    test("the list filters by event type and by event id, with the other filters", async () => {
      const byType = await list("?eventType=checkout.session.completed");
      assert.deepEqual(byType.data.map((r) => r.eventId), ["evt_stripe_3", "evt_stripe_1"]);
      const byId = await list("?eventId=evt_from_plugin");
      assert.deepEqual(byId.data.map((r) => r.eventType), ["charge.dispute.created"]);
      assert.deepEqual((await list("?eventId=evt_stripe_2")).data, [], "the body's id gave way to the plugin's eventId");
      assert.deepEqual((await list("?eventType=checkout.session.completed&pluginName=other")).data, []);
    });

    test("total=true counts every delivery that matches, across pages; without it there is no count", async () => {
      const page = await list("?eventType=checkout.session.completed&limit=1&total=true");
      assert.equal(page.data.length, 1);
      assert.equal(page.pagination.total, 2);
      assert.equal(page.pagination.totalCapped, false);
      assert.equal((await list("?total=true")).pagination.total, 6);
      assert.equal((await list("?limit=2")).pagination.total, undefined);
    });
  });
}
