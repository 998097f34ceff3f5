// The feed's promise under concurrency: a reader polling with its cursor while several writers commit
// events sees every event exactly once and in commit order. On PostgreSQL the writers are two service
// instances on one database, each with its own pool, as two processes would be (on SQLite, one: two
// connections in one thread would wait on each other's lock synchronously). A design that numbers events before commit
// (a plain sequence or autoincrement) fails this: a later number commits first, the reader passes it,
// and the earlier number becomes visible behind the cursor.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { buildApp } from "../../src/app.ts";
import { createServices } from "../../src/services.ts";
import { createHarness, DIALECTS, expectStatus, type Harness } from "../helpers/harness.ts";
import { holdTransaction } from "../helpers/held-transaction.ts";
import { installPlugin, sign, SIGNED_PLUGIN } from "../helpers/webhook.ts";

/** Reads the store's feed with its cursor, as fast as it can, until the writers are done and a page is empty. */
function pollFeed(h: Harness, key: string, writing: () => boolean): { seen: string[]; done: Promise<void> } {
  const seen: string[] = [];
  const done = (async () => {
    let cursor = "";
    for (;;) {
      const last = !writing();
      const r = await h.get(`/api/service/events?limit=7${cursor}`, key);
      expectStatus(r, 200);
      const page = r.json<{ data: { events: { id: string }[] }; pagination: { nextCursor: string } }>();
      seen.push(...page.data.events.map((e) => e.id));
      cursor = `&cursor=${page.pagination.nextCursor}`;
      // One more full drain after the writers are done, then stop.
      if (last && page.data.events.length === 0) return;
      // The next request through the event loop, as over a socket: injected requests on SQLite resolve in
      // microtasks alone, and a loop of them would keep the sandbox's answers (worker messages) from arriving.
      await new Promise((resolve) => setImmediate(resolve));
    }
  })();
  return { seen, done };
}

/** Every event of the store numbered without a gap, and the reader saw each once, in number order. */
async function assertSeenInOrder(h: Harness, storeId: string, seen: string[], count: number): Promise<void> {
  const committed = await h.services.db.kysely.selectFrom("events").select(["id", "seq"]).where("store_id", "=", storeId).orderBy("seq").execute();
  assert.equal(committed.length, count);
  assert.deepEqual(
    committed.map((e) => Number(e.seq)),
    committed.map((_, i) => i + 1),
    "numbers are gap-free",
  );
  assert.equal(new Set(seen).size, seen.length, "no event twice");
  assert.deepEqual(seen, committed.map((e) => e.id), "every event, in number order");
}

/** Six writers run while a reader polls the store's feed; then the reader must have seen every event once, in number order. */
async function writeWhileReading(h: Harness, store: { id: string; key: string }, events: number, write: (w: number) => Promise<void>): Promise<void> {
  let writing = true;
  const feed = pollFeed(h, store.key, () => writing);
  try {
    await Promise.all([0, 1, 2, 3, 4, 5].map(write));
  } finally {
    writing = false;
    await feed.done.catch(() => {});
  }
  await feed.done;
  await assertSeenInOrder(h, store.id, feed.seen, events);
}

for (const { name: dialect, skip } of DIALECTS) {
  describe(`event feed under concurrent writers on ${dialect}`, { skip }, () => {
    test("a polling reader sees every event once, in the order the store's events committed", async () => {
      // The reader polls as fast as it can: the read API's per-key limit (600 a minute) is not what this measures.
      const h = await createHarness(dialect, { RATE_LIMIT_MAX: "1000000" });
      const other = dialect === "postgres" ? await createServices(h.config, { now: h.clock.now }) : h.services;
      try {
        const store = await h.store();
        const customer = await h.customer(store.id);
        const writers = [h.services, other];
        await writeWhileReading(h, store, 240, async (w) => {
          for (let i = 0; i < 40; i++) {
            await writers[(w + i) % 2]!.invoices.checkout(store.id, { customerId: customer.id, paymentMethod: "card", items: [{ productVariantId: `v${w}`, quantity: 1, price: 1 }] });
          }
        });
      } finally {
        if (other !== h.services) await other.close();
        await h.close();
      }
    });

    // Payments number their events in their own statement on PostgreSQL when the store's counter is free
    // (src/payments/payment.postgres.ts), checkouts through the sequencer: both under the counter's lock.
    test("payments and checkouts together: every event once, in number order", async () => {
      const h = await createHarness(dialect, { RATE_LIMIT_MAX: "1000000", WEBHOOK_RATE_LIMIT_MAX: "1000000" });
      const other = dialect === "postgres" ? await createServices(h.config, { now: h.clock.now }) : h.services;
      const otherApp = other === h.services ? h.app : await buildApp(other, { logger: false });
      try {
        const store = await h.store();
        await installPlugin(h, store.id, "pay", SIGNED_PLUGIN);
        const customer = await h.customer(store.id);
        const writers = [h, { services: other, app: otherApp }];
        await writeWhileReading(h, store, 240, async (w) => {
          for (let i = 0; i < 20; i++) {
            const invoice = await writers[(w + i) % 2]!.services.invoices.checkout(store.id, { customerId: customer.id, paymentMethod: "card", items: [{ productVariantId: `v${w}`, quantity: 1, price: 1 }] });
            const body = JSON.stringify({ id: `evt_${w}_${i}`, type: "paid", invoiceId: invoice.id });
            const paid = await writers[(w + i + 1) % 2]!.app.inject({
              method: "POST",
              url: `/api/paymentPlugins?pluginName=pay&storeId=${store.id}`,
              headers: { "content-type": "application/json", "x-signature": sign(body) },
              payload: body,
            });
            expectStatus(paid, 200);
          }
        });
        const paid = await h.services.db.kysely.selectFrom("events").select("id").where("store_id", "=", store.id).where("type", "=", "invoice.completed").execute();
        assert.equal(paid.length, 120, "every payment's event");
      } finally {
        if (otherApp !== h.app) await otherApp.close();
        if (other !== h.services) await other.close();
        await h.close();
      }
    });
  });
}

describe("a list read while another sequencer numbers the same events", { skip: DIALECTS.find((d) => d.name === "postgres")!.skip }, () => {
  test("PostgreSQL: the list waits for the other pass's commit and shows the event that committed before it", async () => {
    const h = await createHarness("postgres");
    try {
      const store = await h.store();
      const customer = await h.customer(store.id);
      await h.services.invoices.checkout(store.id, { customerId: customer.id, paymentMethod: "card", items: [{ productVariantId: "v", quantity: 1, price: 1 }] });
      const db = h.services.db.kysely;
      // Another sequencer mid-pass: it holds the store's unnumbered events (FOR UPDATE) and commits their
      // numbers a little later, as the background loop or another process does.
      const other = await holdTransaction(
        db,
        async (tx) => {
          const rows = await tx.selectFrom("events").select("id").where("store_id", "=", store.id).where("seq", "is", null).forUpdate().execute();
          assert.equal(rows.length, 1, "the checkout's event, not numbered yet");
          return rows[0]!.id;
        },
        async (tx, id) => {
          await tx.insertInto("event_sequences").values({ store_id: store.id, last_seq: 1 }).execute();
          await tx.updateTable("events").set({ seq: 1 }).where("id", "=", id).execute();
        },
      );
      const listed = h.services.events.listEvents(store.id, { limit: 10 });
      setTimeout(other.release, 100);
      const { events } = await listed;
      await other.done;
      assert.deepEqual(events.map((e) => e.type), ["invoice.created"], "the event committed before the read is listed");
    } finally {
      await h.close();
    }
  });
});
