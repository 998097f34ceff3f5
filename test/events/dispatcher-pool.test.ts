// The event dispatcher has its own small PostgreSQL pool: with every connection of the service's pool
// taken (payments waiting for one), queued events still go out.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type pg from "pg";
import { createHarness, DIALECTS, expectStatus } from "../helpers/harness.ts";
import { startReceiver } from "../helpers/receiver.ts";
import { deliverSigned, paymentSetup } from "../helpers/webhook.ts";

describe("PostgreSQL: event dispatch beside a busy pool", { skip: DIALECTS[1]!.skip }, () => {
  // The timeout guards against a hang (a dispatcher waiting on the held pool); it measures nothing.
  test("with every connection of the service's pool held, the dispatcher still claims and delivers an event", { timeout: 60_000 }, async () => {
    const h = await createHarness("postgres", { ENDPOINT_ALLOW: "127.0.0.1" }, { dispatch: { timeoutMs: 2_000 } });
    const receiver = await startReceiver();
    const held: pg.PoolClient[] = [];
    try {
      const { store, invoice } = await paymentSetup(h);
      expectStatus(await h.admin("POST", `/api/admin/stores/${store.id}/endpoints`, { url: receiver.url, types: ["invoice.completed"] }), 201);
      expectStatus(await deliverSigned(h, store.id, { type: "paid", invoiceId: invoice.id }), 200);
      const pool = h.services.db.pgPool!;
      for (let i = 0; i < pool.options.max; i++) held.push(await pool.connect());
      assert.equal(pool.totalCount - pool.idleCount, pool.options.max, "the service's pool is exhausted");
      assert.equal(await h.services.dispatcher.runDue(), 1);
      assert.equal(receiver.received.length, 1);
    } finally {
      for (const c of held) c.release();
      await receiver.close();
      await h.close();
    }
  });
});
