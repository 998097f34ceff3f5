// PostgreSQL numbers a payment's event in the payment's own statement when its store's counter is free,
// and leaves it to the sequencer when the counter is held: a payment never waits on the counter, and the
// feed's order holds either way (test/events/events.feed-order.test.ts checks it under concurrency).
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { createHarness, DIALECTS, expectStatus } from "../helpers/harness.ts";
import { holdTransaction } from "../helpers/held-transaction.ts";
import { deliverSigned, paymentSetup } from "../helpers/webhook.ts";

const pg = DIALECTS.find((d) => d.name === "postgres")!;

describe("a payment's event number on postgres", { skip: pg.skip }, () => {
  test("is given in the payment's statement, after the store's numbered events, with no sequencer pass", async () => {
    const h = await createHarness("postgres");
    try {
      const { store, invoice } = await paymentSetup(h);
      // The checkout's event, numbered by the sequencer: the store's counter row now exists.
      assert.equal(await h.services.sequencer.run(store.id), 1);
      expectStatus(await deliverSigned(h, store.id, { id: "evt_1", type: "paid", invoiceId: invoice.id }), 200);
      const events = await h.services.db.kysely.selectFrom("events").select(["type", "seq"]).where("store_id", "=", store.id).orderBy("pos").execute();
      assert.deepEqual(
        events.map((e) => [e.type, e.seq === null ? null : Number(e.seq)]),
        [
          ["invoice.created", 1],
          ["invoice.completed", 2],
        ],
      );
    } finally {
      await h.close();
    }
  });

  test("is left to the sequencer when another transaction holds the store's counter: the payment does not wait for it", async () => {
    const h = await createHarness("postgres");
    try {
      const { store, invoice } = await paymentSetup(h);
      await h.services.sequencer.run(store.id);
      const db = h.services.db.kysely;
      // Another numbering mid-transaction (a sequencer's pass, another process's payments): the counter's row lock.
      const other = await holdTransaction(db, (tx) => tx.selectFrom("event_sequences").select("last_seq").where("store_id", "=", store.id).forUpdate().execute());
      // A payment that waited for the counter would hang here: the lock goes after 5 s at the latest.
      let released = false;
      const timer = setTimeout(() => {
        released = true;
        other.release();
      }, 5_000);
      try {
        expectStatus(await deliverSigned(h, store.id, { id: "evt_1", type: "paid", invoiceId: invoice.id }), 200);
        assert.equal(released, false, "answered while the counter was held");
        const paid = await db.selectFrom("events").select("seq").where("store_id", "=", store.id).where("type", "=", "invoice.completed").executeTakeFirstOrThrow();
        assert.equal(paid.seq, null, "answered while the counter was held, unnumbered");
      } finally {
        clearTimeout(timer);
        other.release();
        await other.done;
      }
      assert.equal(await h.services.sequencer.run(store.id), 1);
      const r = await h.get("/api/service/events?limit=10", store.key);
      expectStatus(r, 200);
      assert.deepEqual(
        r.json<{ data: { events: { type: string }[] } }>().data.events.map((e) => e.type),
        ["invoice.created", "invoice.completed"],
      );
    } finally {
      await h.close();
    }
  });
});
