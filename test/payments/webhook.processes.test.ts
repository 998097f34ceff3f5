// Webhooks against real service processes: two processes on one PostgreSQL racing on one invoice, and a
// process killed with SIGKILL in the middle of a stream of deliveries (nothing half applied after).
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { describe, test } from "node:test";
import { loadConfig } from "../../src/config.ts";
import { createServices, type Services } from "../../src/services.ts";
import { freshDatabase, pgSkip, type DialectName } from "../helpers/harness.ts";
import { startServer } from "../helpers/server.ts";
import { SIGNED_PLUGIN, TEST_SECRET, sign } from "../helpers/webhook.ts";

async function setup(databaseUrl: string, secretsKey: string, invoices: number) {
  const services = await createServices(loadConfig({ DATABASE_URL: databaseUrl, SECRETS_KEY: secretsKey, LOG_LEVEL: "silent", PLUGIN_POOL_SIZE: "1" }));
  const store = await services.stores.createStore("procs");
  await services.plugins.install(store.id, "pay", { source: SIGNED_PLUGIN, secrets: { key: TEST_SECRET } });
  const customer = await services.customers.create(store.id, { email: "p@example.com" });
  const ids: string[] = [];
  for (let i = 0; i < invoices; i++) {
    ids.push((await services.invoices.checkout(store.id, { customerId: customer.id, paymentMethod: "card", items: [{ productVariantId: "v", quantity: 1, price: 10 }] })).id);
  }
  return { services, storeId: store.id, invoiceIds: ids };
}

function post(base: string, storeId: string, invoiceId: string): Promise<Response> {
  const body = JSON.stringify({ type: "paid", invoiceId });
  return fetch(`${base}/api/paymentPlugins?pluginName=pay&storeId=${storeId}`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-signature": sign(body) },
    body,
  });
}

async function transitionLines(services: Services, invoiceId: string): Promise<number> {
  const rows = await services.db.kysely.selectFrom("invoice_logs").select("log").where("invoice_id", "=", invoiceId).execute();
  return rows.filter((r) => r.log.startsWith("Payment confirmed")).length;
}

describe("two service processes on one PostgreSQL", { skip: pgSkip }, () => {
  test("50 concurrent identical deliveries split over two processes change the invoice once", async () => {
    const db = await freshDatabase("postgres");
    const secretsKey = randomBytes(32).toString("hex");
    const env = { DATABASE_URL: db.url, SECRETS_KEY: secretsKey, PLUGIN_POOL_SIZE: "1", WEBHOOK_RATE_LIMIT_MAX: "100000" };
    const { services, storeId, invoiceIds } = await setup(db.url, secretsKey, 1);
    const a = await startServer(env);
    const b = await startServer(env);
    try {
      const invoiceId = invoiceIds[0]!;
      const answers = await Promise.all(Array.from({ length: 50 }, (_, i) => post(i % 2 === 0 ? a.url : b.url, storeId, invoiceId)));
      assert.deepEqual([...new Set(answers.map((r) => r.status))], [200]);
      const row = await services.db.kysely.selectFrom("invoices").select("status").where("id", "=", invoiceId).executeTakeFirstOrThrow();
      assert.equal(row.status, "completed");
      assert.equal(await transitionLines(services, invoiceId), 1);
      const applied = await services.db.kysely.selectFrom("deliveries").select("outcome").where("invoice_id", "=", invoiceId).where("outcome", "=", "applied").execute();
      assert.equal(applied.length, 1);
    } finally {
      await a.stop();
      await b.stop();
      await services.close();
      await db.drop();
    }
  });
});

for (const dialect of ["sqlite", "postgres"] as DialectName[]) {
  describe(`crash in the middle of deliveries on ${dialect}`, { skip: dialect === "postgres" ? pgSkip : false }, () => {
    test("after kill -9 amid grouped commits and restart, every 200 is applied, nothing half, and the provider's retries apply the rest once", async () => {
      const db = await freshDatabase(dialect);
      const secretsKey = randomBytes(32).toString("hex");
      const env = { DATABASE_URL: db.url, SECRETS_KEY: secretsKey, PLUGIN_POOL_SIZE: "1", WEBHOOK_RATE_LIMIT_MAX: "100000" };
      const { services, storeId, invoiceIds } = await setup(db.url, secretsKey, 120);
      const server = await startServer(env);
      const answered200 = new Set<string>();
      let next = 0;
      const worker = async () => {
        while (next < invoiceIds.length) {
          const id = invoiceIds[next++]!;
          try {
            const r = await post(server.url, storeId, id);
            if (r.status === 200) answered200.add(id);
          } catch {
            return; // the server is gone
          }
        }
      };
      // Sixteen at once: payments that finish together share a commit (src/platform/db/durable.ts).
      const streams = Array.from({ length: 16 }, worker);
      while (answered200.size < 20) await new Promise((r) => setTimeout(r, 5));
      await server.kill9();
      await Promise.all(streams);
      assert.ok(answered200.size < invoiceIds.length, "the kill landed mid-stream");

      const restarted = await startServer(env);
      try {
        const rows = await services.db.kysely.selectFrom("invoices").select(["id", "status"]).where("store_id", "=", storeId).execute();
        const status = new Map(rows.map((r) => [r.id, r.status]));
        for (const id of answered200) assert.equal(status.get(id), "completed", `answered 200 but not applied: ${id}`);
        for (const id of invoiceIds) {
          const lines = await transitionLines(services, id);
          const delivered = await services.db.kysely.selectFrom("deliveries").select("outcome").where("invoice_id", "=", id).where("outcome", "=", "applied").execute();
          if (status.get(id) === "completed") {
            assert.equal(lines, 1, `completed ${id} has its one transition line`);
            assert.equal(delivered.length, 1, `completed ${id} has its delivery record`);
          } else {
            assert.equal(status.get(id), "pending");
            assert.equal(lines, 0, `pending ${id} has no transition line`);
            assert.equal(delivered.length, 0);
          }
        }
        const db = services.db.kysely;
        const completed = invoiceIds.filter((id) => status.get(id) === "completed");
        const claims = await db.selectFrom("applied_events").select("invoice_id").where("store_id", "=", storeId).execute();
        assert.deepEqual(claims.map((c) => c.invoice_id).sort(), [...completed].sort(), "an event is claimed exactly when its change committed");
        const events = await db.selectFrom("events").select("invoice_id").where("store_id", "=", storeId).where("type", "=", "invoice.completed").execute();
        assert.deepEqual(events.map((e) => e.invoice_id).sort(), [...completed].sort(), "each change has its event");
        // The provider retries every delivery it did not get a 200 for: each applies once.
        const rest = invoiceIds.filter((id) => !answered200.has(id));
        for (const id of rest) assert.equal((await post(restarted.url, storeId, id)).status, 200);
        for (const id of invoiceIds) assert.equal(await transitionLines(services, id), 1, `${id} changed once`);
        const after = await db.selectFrom("invoices").select("status").where("store_id", "=", storeId).execute();
        assert.deepEqual([...new Set(after.map((r) => r.status))], ["completed"]);
        // What follows the commits (documents, the events' numbers) is taken up by the restarted process.
        let backlog = "";
        for (let i = 0; i < 200 && backlog !== "0"; i++) {
          backlog = /^storefront_readmodel_backlog (\S+)$/m.exec(await (await fetch(`${restarted.url}/metrics`)).text())?.[1] ?? "";
          if (backlog !== "0") await new Promise((r) => setTimeout(r, 50));
        }
        assert.equal(backlog, "0", "serve's projector rebuilt every stale document");
        for (let i = 0; i < 200 && (await db.selectFrom("events").select("id").where("seq", "is", null).execute()).length > 0; i++) await new Promise((r) => setTimeout(r, 50));
        assert.deepEqual(await db.selectFrom("events").select("id").where("seq", "is", null).execute(), [], "serve's sequencer numbered every event");
      } finally {
        await restarted.stop();
        await services.close();
        await db.drop();
      }
    });
  });
}
