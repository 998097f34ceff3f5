// The sequencer runs after every commit of this process, and on PostgreSQL a payment numbers its own
// events: most of its runs find nothing to number. Such a run is one read, not a transaction of three
// statements; a run that finds events numbers them all.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { DIALECTS, createHarness, type Harness } from "../helpers/harness.ts";
import { statementsSent } from "../helpers/statements-sent.ts";

for (const dialect of DIALECTS) {
  describe(`the event sequencer on ${dialect.name}`, { skip: dialect.skip }, () => {
    let h: Harness;
    const log = statementsSent();
    before(async () => {
      h = await createHarness(dialect.name, {}, { onQuery: log.onQuery });
    });
    after(async () => {
      await h?.close();
    });

    test("a run with no event waiting for its number is one statement and opens no transaction", async () => {
      const store = await h.store();
      const customer = await h.customer(store.id);
      await h.checkout(store.id, { customerId: customer.id, paymentMethod: "card", items: [{ productVariantId: "v", quantity: 1, price: 1 }] });
      await h.services.sequencer.run();
      let numbered = -1;
      const sent = await log.during(async () => {
        numbered = await h.services.sequencer.run();
      });
      assert.equal(numbered, 0);
      assert.equal(sent.length, 1, `one statement:\n${sent.join("\n")}`);
      assert.ok(!sent.some((s) => /^(begin|commit)\b/i.test(s.trim())), `no transaction:\n${sent.join("\n")}`);
    });

    test("a run that finds events waiting numbers every one of them, in their order, after the store's last number", async () => {
      const store = await h.store();
      const customer = await h.customer(store.id);
      await h.checkout(store.id, { customerId: customer.id, paymentMethod: "card", items: [{ productVariantId: "v", quantity: 1, price: 1 }] });
      assert.equal(await h.services.sequencer.run(store.id), 1);
      for (let i = 0; i < 3; i++) await h.checkout(store.id, { customerId: customer.id, paymentMethod: "card", items: [{ productVariantId: "v", quantity: 1, price: 1 }] });
      assert.equal(await h.services.sequencer.run(store.id), 3);
      const events = await h.services.db.kysely.selectFrom("events").select("seq").where("store_id", "=", store.id).orderBy("pos").execute();
      assert.deepEqual(
        events.map((e) => Number(e.seq)),
        [1, 2, 3, 4],
      );
    });
  });
}
