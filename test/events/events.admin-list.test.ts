// The admin listing of a store's events (newest first, by type and invoice, paged) and the next retry
// shown on an endpoint's attempts: what the console's events page reads, on SQLite and PostgreSQL.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { type Kysely, sql } from "kysely";
import { backfillEventInvoices } from "../../src/platform/db/migrations/0012_event_invoice.ts";
import { RETRY_SCHEDULE_MS } from "../../src/events/event-dispatcher.ts";
import { createHarness, DIALECTS, expectStatus, type Harness } from "../helpers/harness.ts";
import { startReceiver, type Receiver } from "../helpers/receiver.ts";
import { deliverSigned, paymentSetup } from "../helpers/webhook.ts";

type Ev = { id: string; type: string; createdAt: string; data: { invoice?: { id: string; status: string } } };
type Page = { data: Ev[]; pagination: { limit: number; nextCursor: string | null } };
type Attempt = { eventId: string; attempt: number; outcome: string; responseStatus: number | null; nextAttemptAt: string | null };

for (const { name: dialect, skip } of DIALECTS) {
  describe(`admin event listing on ${dialect}`, { skip }, () => {
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

    const list = async (storeId: string, query = "") => {
      const r = await h.admin("GET", `/api/admin/stores/${storeId}/events${query}`);
      expectStatus(r, 200);
      return r.json<Page>();
    };

    test("lists a store's events newest first, pages back with the cursor, filters by type and by invoice", async () => {
      const { store, customer, invoice } = await paymentSetup(h);
      const other = await h.checkout(store.id, { customerId: customer.id, paymentMethod: "card", items: [{ productVariantId: "var-2", quantity: 1, price: 5 }] });
      expectStatus(await deliverSigned(h, store.id, { type: "paid", invoiceId: invoice.id }), 200);

      const all = await list(store.id);
      assert.deepEqual(all.data.map((e) => [e.type, e.data.invoice!.id]), [
        ["invoice.completed", invoice.id],
        ["invoice.created", other.id],
        ["invoice.created", invoice.id],
      ]);
      assert.equal(all.pagination.nextCursor, null, "one page holds them all");

      const first = await list(store.id, "?limit=2");
      assert.equal(first.data.length, 2);
      assert.ok(first.pagination.nextCursor);
      const second = await list(store.id, `?limit=2&cursor=${first.pagination.nextCursor}`);
      assert.deepEqual([...first.data, ...second.data].map((e) => e.id), all.data.map((e) => e.id));
      assert.equal(second.pagination.nextCursor, null);

      assert.deepEqual((await list(store.id, "?types=invoice.completed")).data.map((e) => e.id), [all.data[0]!.id]);
      assert.deepEqual((await list(store.id, `?invoiceId=${invoice.id}`)).data.map((e) => e.type), ["invoice.completed", "invoice.created"]);
      assert.deepEqual((await list(store.id, `?invoiceId=${other.id}&types=invoice.completed`)).data, []);
    });

    test("events written before migration 0012 get their invoice from their data", async () => {
      const { store, invoice } = await paymentSetup(h);
      const db = h.services.db.kysely;
      await sql`update events set invoice_id = null where store_id = ${store.id}`.execute(db);
      assert.deepEqual((await list(store.id, `?invoiceId=${invoice.id}`)).data, []);
      await backfillEventInvoices(db as unknown as Kysely<unknown>, { dialect });
      assert.deepEqual((await list(store.id, `?invoiceId=${invoice.id}`)).data.map((e) => e.type), ["invoice.created"]);
    });

    test("refuses an unknown type or a foreign cursor, and answers 404 for a store that does not exist", async () => {
      const { store } = await paymentSetup(h);
      const badType = await h.admin("GET", `/api/admin/stores/${store.id}/events?types=invoice.shipped`);
      expectStatus(badType, 400);
      assert.equal(badType.json<{ error: { param: string } }>().error.param, "types");
      // A feed cursor means "after"; it is not accepted where "before" is meant.
      const feedCursor = Buffer.from("e1:3").toString("base64url");
      expectStatus(await h.admin("GET", `/api/admin/stores/${store.id}/events?cursor=${feedCursor}`), 400);
      expectStatus(await h.admin("GET", `/api/admin/stores/st_nope/events`), 404);
      expectStatus(await h.get(`/api/admin/stores/${store.id}/events`), 401);
    });

    test("a store's listing never shows another store's events", async () => {
      const a = await paymentSetup(h);
      const b = await paymentSetup(h);
      const listed = await list(a.store.id, `?invoiceId=${b.invoice.id}`);
      assert.deepEqual(listed.data, []);
      assert.ok((await list(a.store.id)).data.every((e) => e.data.invoice!.id === a.invoice.id));
    });

    test("an attempt that will be retried says when; a delivered one and earlier attempts say null", async () => {
      const { store, invoice } = await paymentSetup(h);
      const ep = await h.admin("POST", `/api/admin/stores/${store.id}/endpoints`, { url: receiver.url, types: ["invoice.completed"] });
      expectStatus(ep, 201);
      const endpointId = ep.json<{ id: string }>().id;
      receiver.mode = { kind: "status", status: 500 };
      expectStatus(await deliverSigned(h, store.id, { type: "paid", invoiceId: invoice.id }), 200);
      assert.equal(await h.services.dispatcher.runDue(), 1);
      const attempts = async () => {
        const r = await h.admin("GET", `/api/admin/stores/${store.id}/endpoints/${endpointId}/attempts`);
        expectStatus(r, 200);
        return r.json<{ data: Attempt[] }>().data;
      };
      const [failed] = await attempts();
      assert.equal(failed!.outcome, "failed");
      assert.equal(failed!.nextAttemptAt, new Date(h.clock.now() + RETRY_SCHEDULE_MS[0]!).toISOString());

      receiver.mode = { kind: "ok" };
      h.clock.advance(RETRY_SCHEDULE_MS[0]!);
      assert.equal(await h.services.dispatcher.runDue(), 1);
      const [ok, earlier] = await attempts();
      assert.equal(ok!.outcome, "succeeded");
      assert.equal(ok!.nextAttemptAt, null);
      assert.equal(earlier!.nextAttemptAt, null, "the delivery is done: nothing is due");
    });
  });
}
